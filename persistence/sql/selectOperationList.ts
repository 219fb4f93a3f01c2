import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationError, OperationStatus } from '../../machines/operationMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { operationErrorOf } from '../UnreadableValue.ts';

const LIVE: readonly OperationStatus[] = ['SCHEDULED', 'IN_PROGRESS'];

/** An operation as a list shows it. */
export interface OperationListRow {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly retryCount: number;
  readonly maxRetries: number;
  readonly workerId: string | null;
  readonly createdAt: Date;
  readonly lastError: OperationError | null;
}

/**
 * One page of the operations of a kind and status, oldest first, after the (created at, id) of
 * the previous page's last row: one range of the (kind, status, created_at, id) index, which holds
 * every status but the live ones. SCHEDULED and IN_PROGRESS operations (at most the scheduler's
 * `maxScheduled` and the workers' slots) are read off the index of live operations and sorted.
 */
export async function selectOperationList(
  exec: Executor,
  filter: { kind: OperationKind; status: OperationStatus },
  page: { limit: number; after?: { createdAt: Date; id: string } | undefined },
): Promise<OperationListRow[]> {
  const after =
    page.after === undefined
      ? sql`true`
      : sql`(o.created_at, o.id) > (${page.after.createdAt.toISOString()}::timestamptz, ${page.after.id}::uuid)`;
  // Spelled out for the settled statuses so that the partial index matches in a generic plan
  // too (one that cannot see the status parameter's value).
  const settled = LIVE.includes(filter.status)
    ? sql`true`
    : sql`o.status not in ('SCHEDULED', 'IN_PROGRESS')`;
  const rows = await exec.execute(sql`
    select o.id, o.kind, o.status, o.attempt, o.retry_count, o.max_retries, o.worker_id,
      o.created_at, o.last_error
    from operation o
    where o.kind = ${filter.kind} and o.status = ${filter.status} and ${settled} and ${after}
    order by o.kind, o.status, o.created_at, o.id
    limit ${page.limit}`);
  return rows.map(operationListRowOf);
}

/** A selected `operation` row (id, kind, status, attempt, retries, worker, created, error) as a list shows it. */
export function operationListRowOf(r: Row): OperationListRow {
  return {
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    attempt: Number(r.attempt),
    retryCount: Number(r.retry_count),
    maxRetries: Number(r.max_retries),
    workerId: r.worker_id == null ? null : String(r.worker_id),
    createdAt: toDate(r.created_at) as Date,
    lastError: r.last_error == null ? null : operationErrorOf(r.last_error),
  };
}
