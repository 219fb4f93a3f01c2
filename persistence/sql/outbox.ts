import { sql } from 'drizzle-orm';
import { type LeaseFence, leaseHolds } from '../LeaseFence.ts';
import { routeOfRow, toDate } from '../OperationRecord.ts';
import type { OutboxEntry, OutboxPayload } from '../OutboxEntry.ts';
import type { Executor } from '../openDatabase.ts';

/**
 * The oldest `limit` outbox rows written at or before `writtenBy` (all when not given), with
 * whether their operation has moved on since.
 */
export async function selectOutbox(
  exec: Executor,
  limit: number,
  writtenBy?: Date,
): Promise<OutboxEntry[]> {
  const cutoff =
    writtenBy === undefined
      ? sql`true`
      : sql`b.created_at <= ${writtenBy.toISOString()}::timestamptz`;
  const rows = await exec.execute(sql`
    select b.id, b.operation_id, b.attempt, b.queue, b.operation_type, b.location_type, b.payload,
      o.route_site, o.route_location, b.created_at, (o.status <> 'SCHEDULED' or o.attempt <> b.attempt) as stale
    from dispatch_outbox b join operation o on o.id = b.operation_id
    where ${cutoff}
    order by b.id
    limit ${limit}`);
  return rows.map((r) => ({
    id: Number(r.id),
    operationId: String(r.operation_id),
    attempt: Number(r.attempt),
    queue: String(r.queue),
    route: routeOfRow(r),
    payload: (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload) as OutboxPayload,
    createdAt: toDate(r.created_at) as Date,
    stale: r.stale === true,
  }));
}

/** Deletes published outbox rows; returns how many were there. */
export async function deleteOutbox(
  exec: Executor,
  ids: readonly number[],
  fence?: LeaseFence,
): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await exec.execute<{ n: number }>(sql`
    with d as (delete from dispatch_outbox
      where id = any(${`{${ids.join(',')}}`}::bigint[]) and ${leaseHolds(fence)} returning 1)
    select count(*)::int as n from d`);
  return Number(rows[0]?.n ?? 0);
}
