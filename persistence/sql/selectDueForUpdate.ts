import { type SQL, sql } from 'drizzle-orm';
import { DEFAULT_STARVATION_AGE_MS, MAX_PRIORITY } from '../../machines/priority.ts';
import {
  OPERATION_COLUMNS,
  type OperationRecord,
  toDate,
  toOperationRecord,
} from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import {
  admitWithinLimits,
  FLOW_LIMITED,
  flowScopes,
  NOT_FULL,
  NOT_TIGHT,
  OPEN,
} from './admitWithinLimits.ts';

const LIVE = `p.status in ('SCHEDULED', 'IN_PROGRESS')`;

/**
 * Locks up to `limit` due PENDING operations (not_before null or passed), highest priority first
 * and oldest due first within one priority, skipping rows another claimer holds: two claimers
 * running at once never get the same row. An operation due since `starvationAgeMs` ago or longer
 * counts as `MAX_PRIORITY`, so a stream of higher-priority work never starves it. Must run inside
 * a transaction, which holds the locks until the claim is written.
 *
 * Circuit breakers park work per (kind, target location): a pair whose breaker is OPEN is
 * skipped (its operations stay PENDING, no retry spent), and a HALF_OPEN pair gets one probe at a
 * time — none while one of its operations is SCHEDULED or IN_PROGRESS, else the first due one.
 * Two claimers could each pick a different probe of the same pair, so when the batch holds
 * probes, their breaker rows are locked and the "no live operation" check is made again under
 * that lock (two more statements, only then). Reads the backlog in due order through its index and
 * stops at `limit`, however long the backlog is.
 *
 * Flow limits cap the live operations of a (kind, location) or of a location. A scope with less
 * room than `limit` (a full one among them) is read on its own off `operation_pending_scope_idx`,
 * in claim order, for as many rows as it has room for and no more: a full scope's backlog is
 * neither read nor locked (`flowScopes`). When the batch holds rows of a location with any limit,
 * `admitWithinLimits` keeps those that fit, counting under the limits' row locks (two more
 * statements, only then). `heldBack` counts the locked rows it left PENDING.
 */
export async function selectDueForUpdate(
  tx: Executor,
  now: Date,
  limit: number,
  starvationAgeMs: number = DEFAULT_STARVATION_AGE_MS,
): Promise<{ due: OperationRecord[]; heldBack: number }> {
  // Due rows come off three indexes in their order, in four bounded ranges: the starved ones off
  // operation_due_idx (never tried, by creation, created before the cutoff; backed off until a
  // time before the cutoff, by not_before), every scope but the full ones; every due one outside
  // the tight flow-limit scopes off operation_priority_due_idx (by priority, then as the due index
  // orders them), each stopping at `limit`; and each tight scope's own off
  // operation_pending_scope_idx, in the same order, stopping at its room. Their rows, each once,
  // are put in claim order and cut to `limit`. The priority range reads past the rows of a
  // higher priority that wait for a time still ahead (a delayed start, a retry's backoff): those
  // are few unless much high-priority work is delayed. Left to itself the planner, unable to see
  // that most due rows pass the breaker and limit filters or how big a backlog arrived since the
  // last ANALYZE, read and sorted every PENDING row to take the first few hundred: each claim cost
  // as much as the backlog was long. So sorting is off for the claim's transaction, and JIT with
  // it: the penalty that steers the planner away from a sort would otherwise make any plan that
  // must sort look costly enough to compile (hundreds of milliseconds). Sequential scans are off
  // too: on a small or freshly grown table the planner took one for the probes that tell whether
  // any work waits outside the tight flow-limit scopes, reading the whole table once per probe
  // where the index answers each with a page or two. And the plan is the generic one, made once
  // per connection: left to choose, the server planned each of a connection's first five claims
  // for its values (about 4 ms each, a dozen times the execution) and, in the suite's runs, went
  // on planning more than half of all claims; over 100,000 due rows the generic plan's passes
  // took 4–26% less time, reading as many buffers (±5%) but for one case, a limit with room on
  // every location (+14%). Rows a range locks beyond what the cut keeps stay PENDING and are
  // released at commit.
  await tx.execute(
    sql`select set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true),
      set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`,
  );
  const cutoff = new Date(now.getTime() - starvationAgeMs).toISOString();
  const breakerAdmits =
    sql.raw(`(b.state is null or b.state = 'CLOSED' or (b.state = 'HALF_OPEN' and not exists (
          select 1 from operation p
          where p.kind = o.kind and p.target_location_id = o.target_location_id and ${LIVE})))`);
  const due = (when: SQL, order: SQL, take: SQL, limited: SQL) => sql`
      select ${sql.raw(OPERATION_COLUMNS)}, o.target_location_id,
        b.state as breaker_state,
        ${limited} as flow_limited
      from operation o
      left join circuit_breaker b on b.kind = o.kind and b.location_id = o.target_location_id
      where o.status = 'PENDING' and ${when} and ${breakerAdmits}
      order by ${order}
      limit ${take}
      for update of o skip locked`;
  const inDueOrder = sql`o.not_before asc nulls first, o.created_at`;
  const inPriorityOrder = sql`o.priority desc nulls last, ${inDueOrder}`;
  const dueNow = sql`(o.not_before is null or o.not_before <= ${now.toISOString()}::timestamptz)`;
  const ranged = (when: SQL, order: SQL) =>
    sql`select * from (${due(when, order, sql`${limit}`, FLOW_LIMITED)}) due`;
  const rows = await tx.execute(sql`
    with ${flowScopes(limit)}
    ${ranged(sql`o.not_before is null and o.created_at <= ${cutoff}::timestamptz and ${NOT_FULL}`, inDueOrder)}
    union all
    ${ranged(sql`o.not_before <= ${cutoff}::timestamptz and ${NOT_FULL}`, inDueOrder)}
    union all
    ${ranged(sql`${dueNow} and ${NOT_TIGHT} and ${OPEN}`, inPriorityOrder)}
    union all
    select due.* from flow_tight t cross join lateral (${due(
      sql`o.target_location_id = t.location_id and o.kind = t.kind and ${dueNow}`,
      inPriorityOrder,
      sql`t.room`,
      sql`true`,
    )}) due`);
  const batch = inClaimOrder(rows, Date.parse(cutoff)).slice(0, limit);
  const probed = batch.some((r) => r.breaker_state === 'HALF_OPEN')
    ? await admitProbes(tx, batch)
    : batch;
  const admitted = await admitWithinLimits(tx, probed);
  return { due: admitted.map(toOperationRecord), heldBack: batch.length - admitted.length };
}

const millis = (value: unknown) => (value == null ? null : (toDate(value) as Date).getTime());

/**
 * The rows of the three ranges, each once, in claim order: by priority, highest first, a row due
 * since `cutoff` or before counting as `MAX_PRIORITY`; then as the due index orders them (never
 * tried first, by creation; then by the end of their wait).
 */
function inClaimOrder(rows: Row[], cutoff: number): Row[] {
  const keyed = new Map<string, { row: Row; priority: number; wait: number | null; at: number }>();
  for (const row of rows) {
    const id = String(row.id);
    if (keyed.has(id)) continue;
    const wait = millis(row.not_before);
    const at = millis(row.created_at) as number;
    const starved = (wait ?? at) <= cutoff;
    keyed.set(id, { row, priority: starved ? MAX_PRIORITY : Number(row.priority), wait, at });
  }
  return [...keyed.values()]
    .sort(
      (a, b) =>
        b.priority - a.priority ||
        (a.wait ?? Number.NEGATIVE_INFINITY) - (b.wait ?? Number.NEGATIVE_INFINITY) ||
        a.at - b.at,
    ) // a stable sort: rows created in one statement keep the order the index gave them
    .map((k) => k.row);
}

const pairOf = (r: Row) => `${String(r.kind)}|${String(r.target_location_id)}`;

/** Keeps the first due row of each HALF_OPEN pair that still has no live operation. */
async function admitProbes(tx: Executor, rows: Row[]): Promise<Row[]> {
  const probes = new Map<string, { kind: string; location_id: string }>();
  for (const r of rows) {
    if (r.breaker_state === 'HALF_OPEN' && !probes.has(pairOf(r))) {
      probes.set(pairOf(r), { kind: String(r.kind), location_id: String(r.target_location_id) });
    }
  }
  const pairs = JSON.stringify([...probes.values()]);
  const recordset = sql`select q.kind, q.location_id
    from jsonb_to_recordset(${pairs}::jsonb) as q(kind text, location_id uuid)`;
  // Serialises claimers of the same probe: a second one waits here for the first to commit.
  const locked = await tx.execute(sql`
    select b.kind, b.location_id as target_location_id from circuit_breaker b
    where (b.kind, b.location_id) in (${recordset}) and b.state = 'HALF_OPEN'
    order by b.kind, b.location_id
    for update`);
  // A new statement, so a new snapshot: it sees a probe another claimer just committed.
  const busy = await tx.execute(sql`
    select distinct p.kind, p.target_location_id from operation p
    where (p.kind, p.target_location_id) in (${recordset}) and ${sql.raw(LIVE)}`);
  const open = new Set(locked.map(pairOf));
  for (const r of busy) open.delete(pairOf(r));
  return rows.filter((r) => r.breaker_state !== 'HALF_OPEN' || open.delete(pairOf(r)));
}
