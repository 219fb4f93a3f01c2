import { sql } from 'drizzle-orm';
import { isOperationKind, OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { toDate } from './OperationRecord.ts';
import type { Executor, Row } from './openDatabase.ts';
import type { FlowLimit, FlowLimitInput, FlowLimitScope } from './publicRecords.ts';
import { MAX_FLOW_LIMIT } from './schema/flowLimit.ts';
import { LIVE_STATUSES } from './sql/admitWithinLimits.ts';
import { isUuid } from './subtypeFields.ts';

export type { FlowLimit, FlowLimitInput, FlowLimitScope } from './publicRecords.ts';

export { MAX_FLOW_LIMIT } from './schema/flowLimit.ts';

function bad(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message);
}

function toLimit(r: Row): FlowLimit {
  return {
    locationId: String(r.location_id),
    location: `${String(r.site)}/${String(r.name)}`,
    kind: r.kind == null ? null : (r.kind as OperationKind),
    max: Number(r.max_live),
    live: Number(r.live ?? 0),
    updatedAt: toDate(r.updated_at) as Date,
    updatedBy: String(r.updated_by),
  };
}

/** The kind of a scope, checked: null for any kind. */
function kindOf(scope: FlowLimitScope): OperationKind | null {
  const { kind } = scope;
  if (kind === undefined || kind === null) return null;
  if (!isOperationKind(kind)) {
    throw bad(
      `unknown operation kind ${JSON.stringify(kind)}; use one of ${OPERATION_KINDS.join(', ')}, or no kind for a limit on every kind at the location`,
    );
  }
  return kind;
}

/** The limit's maximum, checked. */
function maxOf(max: unknown): number {
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 0 || max > MAX_FLOW_LIMIT) {
    throw bad(
      `a limit's max must be a whole number from 0 (nothing new starts) to ${MAX_FLOW_LIMIT}; got ${JSON.stringify(max)}`,
    );
  }
  return max;
}

/** The select of limits with their location's name and what is live in their scope. */
const LIMITS = sql.raw(`select f.*, l.site, l.name,
    (select count(*) from operation p
     where p.target_location_id = f.location_id and (f.kind is null or p.kind = f.kind)
       and p.${LIVE_STATUSES})::int as live
  from flow_limit f join data_location l on l.id = f.location_id`);

/**
 * Flow limits: how many operations may be live (SCHEDULED or IN_PROGRESS) at once on a location,
 * of one kind or of every kind together. The scheduler enforces them inside its claim, across any
 * number of control planes; this repository sets, lists and clears them. Bad input (an unknown
 * location or kind, a max that is not a whole number in range) is refused with `BAD_INPUT` and
 * changes nothing.
 *
 * @example
 * ```ts
 * const limits = new FlowLimitRepository(database);
 * await limits.set({ location: 'cologne/lta', kind: OperationKind.LONG_TERM_ARCHIVE, max: 2 });
 * await limits.set({ location: 'cologne/lta', max: 3 }); // every kind together
 * for (const l of await limits.list()) console.log(l.location, l.kind ?? '*', l.live, l.max);
 * await limits.clear({ location: 'cologne/lta', kind: OperationKind.LONG_TERM_ARCHIVE });
 * ```
 */
export class FlowLimitRepository {
  readonly #exec: Executor;

  constructor(exec: Executor) {
    this.#exec = exec;
  }

  /**
   * Sets (or replaces) the limit of a scope and returns it. A max of 0 parks the scope: nothing
   * new is claimed there. Lowering a limit below what is live stops new claims; what already
   * started runs on.
   *
   * @example
   * ```ts
   * const limit = await limits.set({ location: archiveId, kind: 'long_term_archive', max: 2 });
   * ```
   */
  async set(input: FlowLimitInput): Promise<FlowLimit> {
    const kind = kindOf(input);
    const max = maxOf(input.max);
    const by = input.by ?? 'operator';
    const locationId = await this.#locationId(input.location);
    await this.#exec.execute(sql`
      insert into flow_limit (location_id, kind, max_live, updated_at, updated_by)
      values (${locationId}::uuid, ${kind}, ${max}, now(), ${by})
      on conflict (location_id, kind) do update
        set max_live = excluded.max_live, updated_at = excluded.updated_at,
          updated_by = excluded.updated_by`);
    return (await this.#find(locationId, kind)) as FlowLimit;
  }

  /**
   * Every limit, by location (site, name) then kind, the location-wide one first, each with what
   * is live in its scope.
   *
   * @example
   * ```ts
   * const full = (await limits.list()).filter((l) => l.live >= l.max);
   * ```
   */
  async list(): Promise<FlowLimit[]> {
    const rows = await this.#exec.execute(
      sql`${LIMITS} order by l.site, l.name, f.location_id, f.kind nulls first`,
    );
    return rows.map(toLimit);
  }

  /**
   * Removes the limit of a scope (the location-wide one when no kind is given) and returns it as
   * it was, or null when the scope had none. Its parked operations are claimed at the next pass.
   *
   * @example
   * ```ts
   * const removed = await limits.clear({ location: 'cologne/lta' });
   * ```
   */
  async clear(scope: FlowLimitScope): Promise<FlowLimit | null> {
    const kind = kindOf(scope);
    const locationId = await this.#locationId(scope.location);
    const before = await this.#find(locationId, kind);
    if (before === null) return null;
    await this.#exec.execute(sql`
      delete from flow_limit
      where location_id = ${locationId}::uuid and kind is not distinct from ${kind}`);
    return before;
  }

  async #find(locationId: string, kind: OperationKind | null): Promise<FlowLimit | null> {
    const [row] = await this.#exec.execute(sql`${LIMITS}
      where f.location_id = ${locationId}::uuid and f.kind is not distinct from ${kind}`);
    return row === undefined ? null : toLimit(row);
  }

  /** A location's id from its id or `site/name`; `BAD_INPUT` for one that is not registered. */
  async #locationId(location: string): Promise<string> {
    if (typeof location !== 'string' || location === '') {
      throw bad(`a limit needs a location: its id or site/name, e.g. cologne/lta`);
    }
    const slash = location.indexOf('/');
    const rows = isUuid(`${location}`)
      ? await this.#exec.execute(sql`select id from data_location where id = ${location}::uuid`)
      : slash > 0
        ? await this.#exec.execute(sql`select id from data_location
            where site = ${location.slice(0, slash)} and name = ${location.slice(slash + 1)}`)
        : [];
    const [row] = rows;
    if (row === undefined) {
      throw bad(
        `unknown location '${location}'; give a registered location's id or site/name (opstate location add registers one)`,
      );
    }
    return String(row.id);
  }
}
