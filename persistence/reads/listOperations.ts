import { type SQL, sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';

/** One line of `opstate list`. */
export interface OperationSummary {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly retryCount: number;
  readonly createdAt: Date;
  readonly finishedAt: Date | null;
  readonly workerId: string | null;
  /** The last error's message, if any. */
  readonly lastError: string | null;
}

/** What `opstate list` filters by; every part optional but the limit. */
export interface ListFilter {
  readonly kind?: OperationKind;
  readonly status?: OperationStatus;
  /** Created at or after. */
  readonly since?: Date;
  readonly limit: number;
}

/**
 * Operations, newest first, filtered by kind, status and creation time.
 *
 * @example
 * ```ts
 * const failed = await listOperations(database, { status: 'FAILED', limit: 50 });
 * ```
 */
export async function listOperations(
  exec: Executor,
  filter: ListFilter,
): Promise<OperationSummary[]> {
  const where: SQL[] = [sql`true`];
  if (filter.kind !== undefined) where.push(sql`kind = ${filter.kind}`);
  if (filter.status !== undefined) where.push(sql`status = ${filter.status}`);
  if (filter.since !== undefined)
    where.push(sql`created_at >= ${filter.since.toISOString()}::timestamptz`);
  const rows = await exec.execute(sql`
    select id, kind, status, attempt, retry_count, created_at, finished_at, worker_id,
      last_error->>'message' as last_error
    from operation where ${sql.join(where, sql` and `)}
    order by created_at desc, id limit ${filter.limit}`);
  return rows.map((r) => ({
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    attempt: Number(r.attempt),
    retryCount: Number(r.retry_count),
    createdAt: toDate(r.created_at) as Date,
    finishedAt: toDate(r.finished_at),
    workerId: r.worker_id == null ? null : String(r.worker_id),
    lastError: r.last_error == null ? null : String(r.last_error),
  }));
}
