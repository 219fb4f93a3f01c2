import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationType } from '../../machines/routing.ts';
import { type LeaseFence, leaseHolds } from '../LeaseFence.ts';
import { routeOfRow, toDate } from '../OperationRecord.ts';
import type { OutboxEntry, ScheduledTransition } from '../OutboxEntry.ts';
import type { Executor } from '../openDatabase.ts';

/**
 * The advisory lock a statement writing a SCHEDULE transition holds, shared, until its
 * transaction ends ('opstdp'). The relay takes it exclusively for an instant, when it is free:
 * every SCHEDULE row with an id drawn so far has then committed or rolled back.
 */
export const DISPATCH_WRITE_LOCK = 0x6f70_7374_6470;

/**
 * The relay's barrier: when no transaction writing a SCHEDULE transition is open, the newest
 * transition id visible. Every SCHEDULE row at or below that id is final (committed, or rolled
 * back and never to appear), and every one written later gets a higher id: the relay may pass the
 * history up to it without leaving a late commit behind, as a cursor over identity ids otherwise
 * would (an id is drawn at insert but visible at commit). While such a transaction is open it
 * returns `undefined` at once: waiting would queue every claim behind the relay, and a claim frozen
 * in its transaction (a stopped process) would stop scheduling with it. The relay tries again at
 * its next pass. The exclusive lock is held only for the one read.
 *
 * @example
 * ```ts
 * const upTo = await dispatchBarrier(database);
 * const rows = await selectDispatches(database, after, upTo, 256);
 * ```
 */
export async function dispatchBarrier(exec: Executor): Promise<number | undefined> {
  // One statement: the function takes the lock, then reads with a snapshot taken once it holds it.
  const [row] = await exec.execute(
    sql`select opstate_dispatch_barrier(${DISPATCH_WRITE_LOCK}) as id`,
  );
  return row?.id == null ? undefined : Number(row.id);
}

/**
 * The SCHEDULE transitions with ids in (`after`, `upTo`], oldest first, at most `limit`: the
 * history's rows alone, off the primary key, for the relay to tell what the scheduler published
 * from what it must (`selectDispatches` then reads those with their operations).
 */
export async function selectScheduled(
  exec: Executor,
  after: number,
  upTo: number,
  limit: number,
): Promise<ScheduledTransition[]> {
  const rows = await exec.execute(sql`
    select id, operation_id, attempt, at from operation_transition
    where id > ${after} and id <= ${upTo} and to_status = 'SCHEDULED'
    order by id
    limit ${limit}`);
  return rows.map((r) => ({
    id: Number(r.id),
    operationId: String(r.operation_id),
    attempt: Number(r.attempt),
    at: toDate(r.at) as Date,
  }));
}

/**
 * Dispatches, each a SCHEDULE transition with its queue and message from the operation and
 * whether the operation has moved on since (another attempt, or no longer SCHEDULED), oldest
 * first: those with ids in (`after`, `upTo`], at most `limit` (a range of the primary key,
 * filtered), or those with the given transition ids.
 */
export async function selectDispatches(
  exec: Executor,
  which: { after: number; upTo: number; limit: number } | { ids: readonly number[] },
): Promise<OutboxEntry[]> {
  const where =
    'ids' in which
      ? sql`t.id = any(${`{${which.ids.filter(Number.isSafeInteger).join(',')}}`}::bigint[])`
      : sql`t.id > ${which.after} and t.id <= ${which.upTo}`;
  const rows = await exec.execute(sql`
    select t.id, t.operation_id, t.attempt, t.at, o.kind, o.operation_type, o.location_type,
      o.route_site, o.route_location, (o.status <> 'SCHEDULED' or o.attempt <> t.attempt) as stale
    from operation_transition t join operation o on o.id = t.operation_id
    where ${where} and t.to_status = 'SCHEDULED'
    order by t.id
    limit ${'ids' in which ? which.ids.length : which.limit}`);
  return rows.map((r) => {
    const route = routeOfRow(r);
    return {
      id: Number(r.id),
      operationId: String(r.operation_id),
      attempt: Number(r.attempt),
      route,
      payload: {
        operationId: String(r.operation_id),
        kind: r.kind as OperationKind,
        operationType: r.operation_type as OperationType,
        attempt: Number(r.attempt),
      },
      createdAt: toDate(r.at) as Date,
      stale: r.stale === true,
    };
  });
}

/**
 * Where the relay stands (`after`: every dispatch at or below it was published or moot) and the
 * newest transition id visible now: with nothing newer than the cursor, a relay pass has nothing
 * to do and takes no barrier.
 */
export async function selectRelayPosition(
  exec: Executor,
): Promise<{ after: number; newest: number }> {
  const [row] = await exec.execute(sql`
    select coalesce((select after_id from dispatch_relay_cursor where id = 1), 0) as after,
      coalesce((select max(id) from operation_transition), 0) as newest`);
  return { after: Number(row?.after ?? 0), newest: Number(row?.newest ?? 0) };
}

/**
 * Moves the relay's cursor forward to `after` (never back); with a `fence`, only while that
 * leadership epoch holds its lease. Returns whether it moved.
 */
export async function saveRelayCursor(
  exec: Executor,
  after: number,
  fence?: LeaseFence,
): Promise<boolean> {
  const rows = await exec.execute(sql`
    insert into dispatch_relay_cursor (id, after_id, updated_at)
    select 1, ${after}, now() where ${leaseHolds(fence)}
    on conflict (id) do update set after_id = excluded.after_id, updated_at = excluded.updated_at
      where dispatch_relay_cursor.after_id < excluded.after_id
    returning 1`);
  return rows.length > 0;
}
