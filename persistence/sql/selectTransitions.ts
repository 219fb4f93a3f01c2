import { type SQL, sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationError, OperationStatus } from '../../machines/operationMachine.ts';
import type { StoredTransition } from '../../machines/replayTransitions.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';

/** A stored transition with the operation it belongs to (what a replay needs of it). */
export interface OperationTransitionRow extends StoredTransition {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly maxRetries: number;
}

/**
 * The columns a replay reads, from `source` (transition rows aliased `t`), each row's operation
 * looked up by its key: `offset 0` keeps it a lookup, where Postgres with statistics older than
 * the tables' growth could otherwise hash-join a sequential scan of every operation.
 */
function selectFrom(source: SQL): SQL {
  return sql`select t.id, t.operation_id, t.from_status, t.to_status, t.event, t.by,
      t.attempt, t.reason, t.at, o.kind, o.max_retries, fe.error
    from ${source}
    join lateral (
      select o.kind, o.max_retries from operation o where o.id = t.operation_id offset 0
    ) o on true
    left join operation_failure_event fe on t.event = 'FAIL' and fe.kind = o.kind
      and fe.operation_id = t.operation_id and fe.attempt = t.attempt`;
}

function json<T>(value: unknown): T {
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}

function toRow(r: Row): OperationTransitionRow {
  return {
    id: Number(r.id),
    operationId: String(r.operation_id),
    kind: r.kind as OperationKind,
    maxRetries: Number(r.max_retries),
    from: (r.from_status ?? null) as OperationStatus | null,
    to: r.to_status as OperationStatus,
    event: String(r.event),
    by: String(r.by),
    attempt: Number(r.attempt),
    reason: r.reason == null ? null : String(r.reason),
    at: toDate(r.at) as Date,
    error: r.error == null ? null : json<OperationError>(r.error),
  };
}

/** The newest transition id (0 when there is none). */
export async function selectLatestTransitionId(exec: Executor): Promise<number> {
  const [row] = await exec.execute(
    sql`select coalesce(max(id), 0) as id from operation_transition`,
  );
  return Number(row?.id ?? 0);
}

/**
 * Transitions with an id above `after` (at most `limit`, in id order), plus those whose ids are
 * in `gaps` (stepped over because not yet committed when read); two primary-key lookups.
 */
export async function selectTransitionsAfter(
  exec: Executor,
  after: number,
  gaps: readonly number[],
  limit: number,
): Promise<OperationTransitionRow[]> {
  const gapIds = gaps.filter((g) => Number.isSafeInteger(g) && g > 0 && g <= after);
  // Straight off the primary key (a range that stops at `limit`, the gaps by point lookups), not
  // ids joined back to the table: that join could be planned as a scan of the whole history.
  const rows =
    gapIds.length === 0
      ? sql`(select * from operation_transition where id > ${after} order by id limit ${limit})`
      : sql`(select * from operation_transition where id > ${after} order by id limit ${limit})
          union all
          (select * from operation_transition where id in (${sql.raw(gapIds.join(', '))}))`;
  const found = await exec.execute(sql`
    with t as materialized (${rows})
    ${selectFrom(sql`t`)}
    order by t.id`);
  return found.map(toRow);
}

/**
 * The whole stored history of some operations (oldest first), up to and including transition
 * `upTo` when given (index on operation id, id).
 */
export async function selectHistories(
  exec: Executor,
  operationIds: readonly string[],
  upTo?: number,
): Promise<OperationTransitionRow[]> {
  if (operationIds.length === 0) return [];
  const rows = await exec.execute(sql`
    ${selectFrom(sql`operation_transition t`)}
    where t.operation_id = any(${`{${operationIds.join(',')}}`}::uuid[])
      ${upTo === undefined ? sql`` : sql`and t.id <= ${upTo}`}
    order by t.operation_id, t.id`);
  return rows.map(toRow);
}
