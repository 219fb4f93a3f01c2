import { type SQL, sql } from 'drizzle-orm';
import { OPERATION_COLUMNS, type OperationRecord, toOperationRecord } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { admitWithinLimits, FULL_SCOPES } from './admitWithinLimits.ts';

const LIVE = `p.status in ('SCHEDULED', 'IN_PROGRESS')`;

/**
 * Locks up to `limit` due PENDING operations (not_before null or passed), oldest due first,
 * skipping rows another claimer holds: two claimers running at once never get the same row.
 * Must run inside a transaction, which holds the locks until the claim is written.
 *
 * Circuit breakers park work per (kind, target location): a pair whose breaker is OPEN is
 * skipped (its operations stay PENDING, no retry spent), and a HALF_OPEN pair gets one probe at a
 * time — none while one of its operations is SCHEDULED or IN_PROGRESS, else the first due one.
 * Two claimers could each pick a different probe of the same pair, so when the batch holds
 * probes, their breaker rows are locked and the "no live operation" check is made again under
 * that lock (two more statements, only then). Reads the backlog in due order through its index and
 * stops at `limit`, however long the backlog is.
 *
 * Flow limits cap the live operations of a (kind, location) or of a location: rows of a scope that
 * is already full are skipped as a breaker's are, and when the batch holds rows of a location with
 * any limit, `admitWithinLimits` keeps those that fit, counting under the limits' row locks (two
 * more statements, only then). `heldBack` counts the locked rows it left PENDING.
 */
export async function selectDueForUpdate(
  tx: Executor,
  now: Date,
  limit: number,
): Promise<{ due: OperationRecord[]; heldBack: number }> {
  // Due rows come off operation_due_idx in its order, one bounded range per kind of due — never
  // tried (not_before null, by creation) and backed off until a time now passed (by not_before) —
  // each stopping at `limit`; their union (null first, as the index orders them) is cut to
  // `limit`. Left to itself the planner, unable to see that most due rows pass the breaker filter
  // or how big a backlog arrived since the last ANALYZE, read and sorted every PENDING row to take
  // the first few hundred: each claim cost as much as the backlog was long. So sorting is off for
  // the claim's transaction (only the union's few hundred rows are sorted), and JIT with it: the
  // penalty that steers the planner away from a sort would otherwise make any plan that must sort
  // look costly enough to compile (hundreds of milliseconds). Rows the second range locks beyond
  // what the cut keeps stay PENDING and are released at commit.
  await tx.execute(
    sql`select set_config('enable_sort', 'off', true), set_config('jit', 'off', true)`,
  );
  const due = (when: SQL) => sql`select * from (
      select ${sql.raw(OPERATION_COLUMNS)}, o.target_location_id, b.state as breaker_state,
        exists (select 1 from flow_limit f where f.location_id = o.target_location_id)
          as flow_limited
      from operation o
      left join circuit_breaker b on b.kind = o.kind and b.location_id = o.target_location_id
      where o.status = 'PENDING' and ${when}
        and (b.state is null or b.state = 'CLOSED' or (b.state = 'HALF_OPEN' and not exists (
          select 1 from operation p
          where p.kind = o.kind and p.target_location_id = o.target_location_id and ${sql.raw(LIVE)})))
        and not exists (select 1 from flow_full x
          where x.location_id = o.target_location_id and (x.kind is null or x.kind = o.kind))
      order by o.not_before asc nulls first, o.created_at
      limit ${limit}
      for update of o skip locked) due`;
  const rows = await tx.execute(sql`
    with ${FULL_SCOPES}
    ${due(sql`o.not_before is null`)}
    union all
    ${due(sql`o.not_before <= ${now.toISOString()}::timestamptz`)}
    order by not_before asc nulls first, created_at
    limit ${limit}`);
  const probed = rows.some((r) => r.breaker_state === 'HALF_OPEN')
    ? await admitProbes(tx, rows)
    : rows;
  const admitted = await admitWithinLimits(tx, probed);
  return { due: admitted.map(toOperationRecord), heldBack: rows.length - admitted.length };
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
