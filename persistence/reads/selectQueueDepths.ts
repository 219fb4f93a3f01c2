import { sql } from 'drizzle-orm';
import type { AttentionQueueRow } from '../../machines/attention.ts';
import { routeOfRow, toDate } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';
import { uuidArray } from '../sql/selectOperations.ts';

/**
 * A routing queue's live work: dispatches waiting (SCHEDULED) and running (IN_PROGRESS), and
 * whether a live worker holds work from it (who reads it is the heartbeats' to say: `readersOf`).
 */
export interface QueueDepth extends Omit<AttentionQueueRow, 'readers' | 'readersKnown'> {
  readonly inProgress: number;
}

/**
 * The live work per routing queue (`queueName`: `<site>_<location>_<location type>_<operation type>`, or a legacy one), for every queue that has
 * any: how many operations are SCHEDULED (dispatched, not started) and since when the oldest of
 * them, how many IN_PROGRESS, and whether one of `servingIds` — the operations that workers with
 * a live heartbeat hold — is of the queue. Reads the index of live operations (a bounded few:
 * the scheduler's `maxScheduled` and the workers' slots) and the held operations by id.
 *
 * @example
 * ```ts
 * const queues = await selectQueueDepths(database, ['0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f']);
 * queues.filter((q) => q.waiting > 0 && !q.served);
 * ```
 */
export async function selectQueueDepths(
  exec: Executor,
  servingIds: readonly string[],
): Promise<QueueDepth[]> {
  const rows = await exec.execute(sql`
    with q as (
      select o.route_site, o.route_location, o.location_type, o.operation_type,
        count(*) filter (where o.status = 'SCHEDULED')::int as waiting,
        count(*) filter (where o.status = 'IN_PROGRESS')::int as in_progress,
        min(o.scheduled_at) filter (where o.status = 'SCHEDULED') as oldest
      from operation o where o.status in ('SCHEDULED', 'IN_PROGRESS')
      group by 1, 2, 3, 4
    ),
    served as (
      select distinct o.route_site, o.route_location, o.location_type, o.operation_type
      from operation o where o.id = any(${uuidArray(servingIds)}::uuid[])
    )
    select q.*, exists (select 1 from served s where s.location_type = q.location_type
      and s.operation_type = q.operation_type
      and s.route_site is not distinct from q.route_site
      and s.route_location is not distinct from q.route_location) as served
    from q order by q.route_site nulls first, q.route_location, q.location_type, q.operation_type`);
  return rows.map((r) => ({
    route: routeOfRow(r),
    waiting: Number(r.waiting),
    inProgress: Number(r.in_progress),
    oldestWaiting: toDate(r.oldest),
    served: r.served === true,
  }));
}
