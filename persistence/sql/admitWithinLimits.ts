import { type SQL, sql } from 'drizzle-orm';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { uuidArray } from './selectOperations.ts';

/** The live statuses a flow limit counts (text for SQL, from the caller's own code). */
export const LIVE_STATUSES = `status in ('SCHEDULED', 'IN_PROGRESS')`;

const KINDS = `array[${OPERATION_KINDS.map((k) => `'${k}'`).join(', ')}]::text[]`;

/**
 * A statement fragment that sorts the flow-limit scopes for the due selection of a batch of
 * `batch`, from a snapshot taken before the claim's locks (so it only saves work: the admission
 * below decides). The live work of the limited locations is counted once, by (location, kind)
 * (`flow_live`), and each limit sums its scope from those counts into its room (`flow_room`): a
 * count per limit read every live operation once per limit (100 limits over 1,000 live
 * operations: 52,700 buffers a claim). Then `flow_skip`, one row of arrays and a flag:
 *
 * - `locations`, `scopes`: the full location-wide limits and the full `location|kind` pairs, whose
 *   rows the starved ranges skip;
 * - `tight_locations`, `tight_scopes`: the limits with less room than the batch (the full ones
 *   among them). Their rows are read scope by scope (`flow_tight`), never by the ranges that read
 *   the whole backlog in order;
 * - `limited`: every location with any limit;
 * - `open`: whether any PENDING row can be outside the tight scopes (there are none, or a row
 *   has no target location, or one is PENDING in a (location, kind) outside them: a probe of
 *   `operation_pending_scope_idx` per such pair until one is found). When not, the priority range
 *   is not read at all, so a backlog behind full limits is not read past.
 *
 * `flow_tight` lists each tight (location, kind) scope with what it may take: the least room of
 * the limits over it (and the batch), every kind of a tight location-wide limit, the scopes with
 * no room left out. The due read takes at most that many rows of each off
 * `operation_pending_scope_idx`, so it locks no row its scope has no room for; only the kinds of
 * one location under a location-wide limit can together take more than its room (each is given
 * the location's room), and the admission holds the rest back.
 *
 * The due read tests each row against the arrays, computed once per statement: an anti-join on a
 * table of full scopes was planned as a nested loop that walked every full scope for every due
 * row read, and a subquery per row for `limited` cost an index probe and a heap fetch per row.
 */
export function flowScopes(batch: number): SQL {
  const b = String(Math.trunc(batch));
  return sql.raw(`flow_live as materialized (
    select p.target_location_id as location_id, p.kind, count(*) as n from operation p
    where p.${LIVE_STATUSES}
      and p.target_location_id = any(array(select location_id from flow_limit))
    group by p.target_location_id, p.kind),
  flow_room as materialized (
    select f.location_id, f.kind, f.max_live - coalesce(sum(l.n), 0) as room from flow_limit f
    left join flow_live l on l.location_id = f.location_id and (f.kind is null or l.kind = f.kind)
    group by f.location_id, f.kind, f.max_live),
  flow_skip as materialized (
    select x.*, (cardinality(x.tight_locations) + cardinality(x.tight_scopes) = 0
        or exists (select 1 from operation o
          where o.status = 'PENDING' and o.target_location_id is null)
        or exists (select 1 from data_location d cross join unnest(${KINDS}) k(kind)
          where d.id <> all(x.tight_locations)
            and (d.id::text || '|' || k.kind) <> all(x.tight_scopes)
            and (select true from operation o where o.status = 'PENDING'
              and o.target_location_id = d.id and o.kind = k.kind limit 1))) as open
    from (select
      coalesce((select array_agg(r.location_id) from flow_room r
        where r.kind is null and r.room <= 0), '{}') as locations,
      coalesce((select array_agg(r.location_id::text || '|' || r.kind) from flow_room r
        where r.kind is not null and r.room <= 0), '{}') as scopes,
      coalesce((select array_agg(r.location_id) from flow_room r
        where r.kind is null and r.room < ${b}), '{}') as tight_locations,
      coalesce((select array_agg(r.location_id::text || '|' || r.kind) from flow_room r
        where r.kind is not null and r.room < ${b}), '{}') as tight_scopes,
      array(select distinct f.location_id from flow_limit f) as limited) x),
  flow_tight as materialized (
    select s.location_id, s.kind, least(w.room, k.room, ${b}) as room from (
      select r.location_id, unnest(${KINDS}) as kind from flow_room r
      where r.kind is null and r.room < ${b}
      union
      select r.location_id, r.kind from flow_room r where r.kind is not null and r.room < ${b}) s
    left join flow_room w on w.location_id = s.location_id and w.kind is null
    left join flow_room k on k.location_id = s.location_id and k.kind = s.kind
    where least(w.room, k.room, ${b}) > 0)`);
}

/**
 * Conditions on a due row `o` against `flow_skip`: `FLOW_LIMITED` (its location has a limit),
 * `NOT_FULL` (no scope of it is full) and `NOT_TIGHT` (no scope of it is tight: read by the
 * ranges over the whole backlog, not scope by scope). A row without a target location is in no
 * scope. Each array is read once per statement (an InitPlan).
 */
export const FLOW_LIMITED = sql.raw(
  `coalesce(o.target_location_id = any((select limited from flow_skip)::uuid[]), false)`,
);
const outside = (locations: string, scopes: string) =>
  sql.raw(`coalesce(o.target_location_id <> all((select ${locations} from flow_skip)::uuid[])
          and (o.target_location_id::text || '|' || o.kind) <> all((select ${scopes} from flow_skip)::text[]),
        true)`);
export const NOT_FULL = outside('locations', 'scopes');
export const NOT_TIGHT = outside('tight_locations', 'tight_scopes');
/** True when the priority range can find a row outside the tight scopes (see `flowScopes`). */
export const OPEN = sql.raw(`(select open from flow_skip)`);

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
