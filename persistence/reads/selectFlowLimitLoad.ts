import { sql } from 'drizzle-orm';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import type { Executor } from '../openDatabase.ts';

/** One flow limit with what runs under it and what waits behind it. */
export interface FlowLimitLoad {
  readonly locationId: string;
  /** `site/name` of the location. */
  readonly location: string;
  /** The kind it caps; null for every kind at the location together. */
  readonly kind: OperationKind | null;
  readonly max: number;
  /** Operations SCHEDULED or IN_PROGRESS in its scope: what the limit counts. */
  readonly inUse: number;
  /**
   * Operations PENDING in its scope: due ones the limit may hold back, and those waiting for a
   * time (a delayed start, a retry's backoff).
   */
  readonly waiting: number;
}

/**
 * Every flow limit with its in-use count (SCHEDULED + IN_PROGRESS in its scope, as the claim counts
 * them) and its waiting count (PENDING in its scope), ordered by location then kind, the
 * every-kind limit first. Both counts come off the partial indexes of live and of PENDING
 * operations by (target location, kind), one range per kind, so they cost what runs and waits at
 * the limited locations, not the whole table.
 *
 * @example
 * ```ts
 * for (const l of await selectFlowLimitLoad(database)) console.log(l.location, l.inUse, l.max, l.waiting);
 * ```
 */
export async function selectFlowLimitLoad(exec: Executor): Promise<FlowLimitLoad[]> {
  const kinds = sql.raw(`array[${OPERATION_KINDS.map((k) => `'${k}'`).join(', ')}]::text[]`);
  const count = (status: string) => sql`(select count(*) from operation p
      where p.kind = any(case when f.kind is null then ${kinds} else array[f.kind] end)
        and p.target_location_id = f.location_id and ${sql.raw(status)})::int`;
  const rows = await exec.execute(sql`
    select f.location_id, f.kind, f.max_live, l.site, l.name,
      ${count(`p.status in ('SCHEDULED', 'IN_PROGRESS')`)} as in_use,
      ${count(`p.status = 'PENDING'`)} as waiting
    from flow_limit f join data_location l on l.id = f.location_id
    order by l.site, l.name, f.location_id, f.kind nulls first`);
  return rows.map((r) => ({
    locationId: String(r.location_id),
    location: `${String(r.site)}/${String(r.name)}`,
    kind: r.kind == null ? null : (r.kind as OperationKind),
    max: Number(r.max_live),
    inUse: Number(r.in_use),
    waiting: Number(r.waiting),
  }));
}
