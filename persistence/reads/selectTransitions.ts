import { type SQL, sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { StoredTransition } from '../../machines/replayTransitions.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { byKey } from '../sql/byKey.ts';
import { transitionsAfterCursor } from '../sql/transitionsAfterCursor.ts';
import { operationErrorOf } from '../UnreadableValue.ts';

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

/**
 * The newest transition id (0 when there is none): where a cursor that follows new transitions
 * starts.
 *
 * @example
 * ```ts
 * cursor.start(await selectLatestTransitionId(database));
 * ```
 */
export async function selectLatestTransitionId(exec: Executor): Promise<number> {
  const [row] = await exec.execute(
    sql`select coalesce(max(id), 0) as id from operation_transition`,
  );
  return Number(row?.id ?? 0);
}

/**
 * Transitions with an id above `after` (at most `limit`, in id order), plus those whose ids are
 * in `gaps` (stepped over because not yet committed when read): `transitionsAfterCursor`.
 *
 * @example
 * ```ts
 * const rows = await selectTransitionsAfter(database, cursor.after, cursor.gaps(now), 1024);
 * ```
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
 *
 * @example
 * ```ts
 * const history = await selectHistories(database, [operationId]);
 * const steps = replayTransitions({ kind, maxRetries: 3 }, history);
 * ```
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
