import { sql } from 'drizzle-orm';
import type { Executor, Row } from '../openDatabase.ts';
import { uuidArray } from './selectOperations.ts';

/** The live statuses a flow limit counts (text for SQL, from the caller's own code). */
export const LIVE_STATUSES = `status in ('SCHEDULED', 'IN_PROGRESS')`;

/**
 * A statement fragment naming the scopes that are full right now (live work at or above their
 * limit), for the due selection to skip their rows before it locks any: `flow_skip`, one row of
 * three arrays — `locations` (full location-wide), `scopes` (full `location|kind` pairs) and
 * `limited` (every location with any limit). It reads a snapshot taken before the claim's locks,
 * so it only saves work: the admission below decides. The live work of the limited locations is
 * counted once, by (location, kind) (`flow_live`), and each limit sums its scope from those counts:
 * a count per limit read every live operation once per limit (100 limits over 1,000 live
 * operations: 52,700 buffers a claim). The due read tests each row against the arrays, computed
 * once per statement: an anti-join on a table of full scopes was planned as a nested loop that
 * walked every full scope for every due row read, and a subquery per row for `limited` cost an
 * index probe and a heap fetch per row; together most of a limited claim's time.
 */
export const FULL_SCOPES = sql.raw(`flow_live as materialized (
    select p.target_location_id as location_id, p.kind, count(*) as n from operation p
    where p.${LIVE_STATUSES}
      and p.target_location_id = any(array(select location_id from flow_limit))
    group by p.target_location_id, p.kind),
  flow_full as materialized (
    select f.location_id, f.kind from flow_limit f
    left join flow_live l on l.location_id = f.location_id and (f.kind is null or l.kind = f.kind)
    group by f.location_id, f.kind, f.max_live
    having f.max_live <= coalesce(sum(l.n), 0)),
  flow_skip as materialized (
    select
      coalesce((select array_agg(x.location_id) from flow_full x where x.kind is null),
        '{}') as locations,
      coalesce((select array_agg(x.location_id::text || '|' || x.kind) from flow_full x
        where x.kind is not null), '{}') as scopes,
      array(select distinct f.location_id from flow_limit f) as limited)`);

/**
 * Conditions on a due row `o` against `flow_skip`: `FLOW_LIMITED` (its location has a limit) and
 * `NOT_FULL` (no scope of it is full; a row without a target location is in none). Each array is
 * read once per statement (an InitPlan).
 */
export const FLOW_LIMITED = sql.raw(
  `coalesce(o.target_location_id = any((select limited from flow_skip)::uuid[]), false)`,
);
export const NOT_FULL =
  sql.raw(`coalesce(o.target_location_id <> all((select locations from flow_skip)::uuid[])
          and (o.target_location_id::text || '|' || o.kind) <> all((select scopes from flow_skip)::text[]),
        true)`);

/** True for a due row whose target location has any flow limit (the due selection says so). */
const isLimited = (r: Row) => r.flow_limited === true || r.flow_limited === 't';

const scopeOf = (location: unknown, kind: unknown) =>
  `${String(location)}|${kind == null ? '*' : String(kind)}`;

/**
 * Keeps, in due order, the rows that fit under every flow limit of their target location — the
 * limit of their (kind, location) and the limit of the location for any kind — and drops the
 * rest (they stay PENDING, their row locks released at commit). Rows of a location without a
 * limit pass untouched, and a batch with none costs no statement.
 *
 * Why this cannot overshoot with any number of claimers: the count of live operations that the
 * decision rests on is taken after the limit rows are locked (`for update`), in a statement of its
 * own, so under READ COMMITTED it sees every claim committed by whoever held those locks before.
 * Only a claim raises the live count (SCHEDULE is the one way into SCHEDULED), and a claimer that
 * admits anything under a limit holds that limit's row until it commits. Two claimers of one
 * location therefore take turns: the second counts after the first's SCHEDULED rows are visible.
 * The rows are locked in one order (location, then the location-wide row before the per-kind
 * ones), after any breaker rows, so two claimers never wait on each other in a circle. A limit
 * lowered below what is already live stops new claims; it does not stop what already started.
 */
export async function admitWithinLimits(tx: Executor, rows: Row[]): Promise<Row[]> {
  const limited = rows.filter(isLimited);
  if (limited.length === 0) return rows;
  // One array parameter: a set joined from a JSON list was planned as a nested loop that unpacked
  // the list again for every limit row (2.5 ms for 100 limits, most of the admission's time).
  const inBatch = sql`any(${uuidArray([...new Set(limited.map((r) => String(r.target_location_id)))])}::uuid[])`;
  const limits = await tx.execute(sql`
    select f.location_id, f.kind, f.max_live from flow_limit f
    where f.location_id = ${inBatch}
    order by f.location_id, f.kind nulls first
    for update`);
  // A new statement, so a new snapshot: it sees the claims committed while this one waited above.
  const live = await tx.execute(sql`
    select p.target_location_id, p.kind, count(*)::int as n from operation p
    where p.target_location_id = ${inBatch} and p.${sql.raw(LIVE_STATUSES)}
    group by p.target_location_id, p.kind`);
  const room = new Map<string, number>();
  for (const f of limits) room.set(scopeOf(f.location_id, f.kind), Number(f.max_live));
  for (const p of live) {
    for (const scope of [
      scopeOf(p.target_location_id, p.kind),
      scopeOf(p.target_location_id, null),
    ]) {
      const left = room.get(scope);
      if (left !== undefined) room.set(scope, left - Number(p.n));
    }
  }
  return rows.filter((r) => {
    if (!isLimited(r)) return true;
    const scopes = [
      scopeOf(r.target_location_id, r.kind),
      scopeOf(r.target_location_id, null),
    ].filter((s) => room.has(s));
    if (scopes.some((s) => (room.get(s) as number) <= 0)) return false;
    for (const s of scopes) room.set(s, (room.get(s) as number) - 1);
    return true;
  });
}
