import { type SQL, sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { StoredTransition } from '../../machines/replayTransitions.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { operationErrorOf } from '../UnreadableValue.ts';
import { byKey } from './byKey.ts';

/** A stored transition with the operation it belongs to (what a replay needs of it). */
export interface OperationTransitionRow extends StoredTransition {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly maxRetries: number;
}

/** The columns a replay reads, from `source` (transition rows aliased `t`), with each row's operation. */
function selectFrom(source: SQL): SQL {
  return sql`select t.id, t.operation_id, t.from_status, t.to_status, t.event, t.by,
      t.attempt, t.reason, t.at, o.kind, o.max_retries, fe.error
    from ${source}
    join ${byKey('operation', 'o', 't.operation_id', 'o.kind, o.max_retries')} on true
    left join operation_failure_event fe on t.event = 'FAIL' and fe.kind = o.kind
      and fe.operation_id = t.operation_id and fe.attempt = t.attempt`;
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
    error: r.error == null ? null : operationErrorOf(r.error),
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
 * The rows of `operation_transition` a cursor reads next, as a row source for a `with` clause:
 * those with an id above `after` (at most `limit`, in id order) and those whose ids are in `gaps`
 * (at or below `after`: stepped over because not yet committed when read). Straight off the
 * primary key — a range scan that stops at `limit`, the gaps by point lookups in a second branch
 * (one OR of the two would scan) — and never ids joined back to the table: Postgres, with
 * statistics older than the history's growth, planned that join as a sequential scan of every
 * transition (844,000 rows, 0.47 s per read).
 *
 * @example
 * ```ts
 * sql`with t as materialized (${transitionsAfterCursor(cursor.after, cursor.gaps(now), 1024, sql`id, event`)}) select … from t`;
 * ```
 */
export function transitionsAfterCursor(
  after: number,
  gaps: readonly number[],
  limit: number,
  columns: SQL,
): SQL {
  const gapIds = gaps.filter((g) => Number.isSafeInteger(g) && g > 0 && g <= after);
  const range = sql`(select ${columns} from operation_transition where id > ${after} order by id limit ${limit})`;
  if (gapIds.length === 0) return range;
  return sql`${range}
    union all
    (select ${columns} from operation_transition where id in (${sql.raw(gapIds.join(', '))}))`;
}

/**
 * Transitions with an id above `after` (at most `limit`, in id order), plus those whose ids are
 * in `gaps` (stepped over because not yet committed when read): `transitionsAfterCursor`.
 */
export async function selectTransitionsAfter(
  exec: Executor,
  after: number,
  gaps: readonly number[],
  limit: number,
): Promise<OperationTransitionRow[]> {
  const rows = await exec.execute(sql`
    with t as materialized (${transitionsAfterCursor(after, gaps, limit, sql`*`)})
    ${selectFrom(sql`t`)}
    order by t.id`);
  return rows.map(toRow);
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
