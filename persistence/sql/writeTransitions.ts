import { sql } from 'drizzle-orm';
import { type LeaseFence, leaseHolds } from '../LeaseFence.ts';
import type { Executor } from '../openDatabase.ts';
import type { TransitionWrite } from '../planTransition.ts';
import { DISPATCH_WRITE_LOCK } from './dispatchRelay.ts';
import { recordsetJson } from './recordsetJson.ts';

export interface WrittenTransition {
  readonly id: string;
  readonly version: number;
}

/**
 * Writes N planned transitions in ONE statement: a compare-and-set UPDATE of the base rows
 * (`version` must still be the one the plan was made from), then — only for the rows that won —
 * the transition rows and the breadcrumbs of `recordFailure` effects. A row that lost its
 * compare-and-set (or does not exist) is simply absent from the result, and nothing was written
 * for it. With a `fence` (a control-plane write) nothing is written unless that leadership epoch
 * still holds its lease.
 *
 * A `dispatch` effect writes nothing of its own: its SCHEDULE transition row is the record the
 * relay publishes from. A statement that writes one first takes the dispatch write lock, shared,
 * for the rest of its transaction, so the relay's barrier (`dispatchBarrier`) knows when every
 * SCHEDULE row below an id has committed or rolled back.
 */
export async function writeTransitions(
  exec: Executor,
  writes: readonly TransitionWrite[],
  fence?: LeaseFence,
): Promise<WrittenTransition[]> {
  if (writes.length === 0) return [];
  // Only a write that dispatches takes the relay's lock: it must be held before the statement
  // draws a transition id, so `i`, which every write below reads, reads it first.
  const dispatching = writes.some((w) => w.ob_queue !== null);
  const lock = dispatching
    ? sql`lk as materialized (select pg_advisory_xact_lock_shared(${DISPATCH_WRITE_LOCK})::text),`
    : sql``;
  const rows = await exec.execute<{ id: string; version: number }>(sql`
    with ${lock} i as (
      select i.* from ${dispatching ? sql`lk, ` : sql``}jsonb_to_recordset(${recordsetJson(writes)}::jsonb) as i(
        id uuid, expected_version int, status text, attempt int, retry_count int, snapshot jsonb,
        not_before timestamptz, last_error jsonb, worker_id text, scheduled_at timestamptz,
        started_at timestamptz, finished_at timestamptz,
        t_from text, t_event text, t_attempt int, t_by text, t_reason text, t_at timestamptz,
        fe_kind text, fe_attempt int, fe_error jsonb)
      where ${leaseHolds(fence)}
    ),
    u as (
      update operation o set
        status = i.status, attempt = i.attempt, retry_count = i.retry_count,
        snapshot = i.snapshot, not_before = i.not_before,
        last_error = case when jsonb_typeof(i.last_error) = 'null' then null else i.last_error end,
        worker_id = i.worker_id, scheduled_at = i.scheduled_at, started_at = i.started_at,
        finished_at = i.finished_at, status_changed_at = i.t_at, version = o.version + 1
      from i
      where o.id = i.id and o.version = i.expected_version
      returning o.id, o.version
    ),
    t as (
      insert into operation_transition
        (operation_id, from_status, to_status, event, attempt, by, reason, at)
      select i.id, i.t_from, i.status, i.t_event, i.t_attempt, i.t_by, i.t_reason, i.t_at
      from i join u on u.id = i.id
    ),
    fe as (
      insert into operation_failure_event (kind, operation_id, attempt, error, at)
      select i.fe_kind, i.id, i.fe_attempt, i.fe_error, i.t_at
      from i join u on u.id = i.id
      where i.fe_kind is not null
      on conflict do nothing
    )
    select u.id, u.version from u`);
  return rows.map((r) => ({ id: String(r.id), version: Number(r.version) }));
}
