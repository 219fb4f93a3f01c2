import { sql } from 'drizzle-orm';
import { systemClock } from '../machines/Clock.ts';
import { type CircuitFailure, CircuitState } from '../machines/circuitBreaker.ts';
import { isOperationKind, OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { type LeaseFence, leaseHolds } from './LeaseFence.ts';
import { toDate } from './OperationRecord.ts';
import type { Executor, Row } from './openDatabase.ts';
import { selectLatestTransitionId } from './reads/selectTransitions.ts';
import { byKey } from './sql/byKey.ts';
import { transitionsAfterCursor } from './sql/transitionsAfterCursor.ts';
import { isUuid } from './subtypeFields.ts';

export { type CircuitFailure, CircuitState } from '../machines/circuitBreaker.ts';

/** One circuit breaker row. `version` is null for a pair that has no row yet. */
export interface CircuitBreakerRecord {
  readonly kind: OperationKind;
  readonly locationId: string;
  readonly state: CircuitState;
  readonly consecutiveFailures: number;
  readonly openedAt: Date | null;
  readonly lastFailure: CircuitFailure | null;
  readonly version: number | null;
  readonly updatedAt: Date | null;
}

/** A breaker as an operator sees it: its location named by site and name. */
export interface CircuitBreakerView extends CircuitBreakerRecord {
  /** `site/name` of the location, or the id when the location is gone. */
  readonly location: string;
}

/**
 * One row of `operation_transition` after a cursor: every id comes back (so the caller can tell a
 * gap from a row of another event), and FAIL/COMPLETE rows carry the pair and the failure.
 */
export interface TransitionOutcome {
  readonly id: number;
  /** 'FAIL' or 'COMPLETE' with a known target location; null for any other row. */
  readonly outcome: 'FAIL' | 'COMPLETE' | null;
  readonly kind: OperationKind | null;
  readonly locationId: string | null;
  readonly operationId: string;
  readonly attempt: number;
  readonly at: Date;
  /** The failure (from its breadcrumb, else the transition's reason); null unless FAIL. */
  readonly error: { message: string; retryable: boolean; code?: string } | null;
}

/** A breaker row to write: `expectedVersion` null inserts, otherwise a compare-and-set update. */
export interface CircuitBreakerWrite extends Omit<CircuitBreakerRecord, 'version' | 'updatedAt'> {
  readonly expectedVersion: number | null;
  readonly updatedAt: Date;
}

function json<T>(value: unknown): T {
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}

function toRecord(r: Row): CircuitBreakerRecord {
  return {
    kind: r.kind as OperationKind,
    locationId: String(r.location_id),
    state: r.state as CircuitState,
    consecutiveFailures: Number(r.consecutive_failures),
    openedAt: toDate(r.opened_at),
    lastFailure: r.last_failure == null ? null : json<CircuitFailure>(r.last_failure),
    version: r.version == null ? null : Number(r.version),
    updatedAt: toDate(r.updated_at),
  };
}

function toView(r: Row): CircuitBreakerView {
  return {
    ...toRecord(r),
    location: r.site == null ? String(r.location_id) : `${String(r.site)}/${String(r.name)}`,
  };
}

/** A pair as a jsonb recordset argument (kinds and ids come from rows we read, never input). */
function pairsJson(pairs: readonly { kind: string; locationId: string }[]): string {
  return JSON.stringify(pairs.map((p) => ({ kind: p.kind, location_id: p.locationId })));
}

/**
 * Circuit breakers per (kind, target location): the rows, the outcomes that move them, and the
 * operator's reset. The decisions (when to open, half-open, close) belong to the control plane's
 * breaker loop; this repository only reads and writes.
 *
 * @example
 * ```ts
 * const breakers = new CircuitBreakerRepository(database);
 * for (const b of await breakers.listNotClosed()) console.log(b.kind, b.location, b.state);
 * await breakers.reset(OperationKind.LONG_TERM_ARCHIVE, archiveId);
 * ```
 */
export class CircuitBreakerRepository {
  readonly #exec: Executor;

  constructor(exec: Executor) {
    this.#exec = exec;
  }

  /**
   * Every breaker that has a row (a pair without one is CLOSED), with its location's site and name,
   * by kind then location.
   *
   * @example
   * ```ts
   * const states = (await breakers.list()).map((b) => [b.kind, b.location, b.state]);
   * ```
   */
  async list(): Promise<CircuitBreakerView[]> {
    const rows = await this.#exec.execute(sql`
      select b.*, l.site, l.name from circuit_breaker b
      left join data_location l on l.id = b.location_id
      order by b.kind, l.site, l.name, b.location_id`);
    return rows.map(toView);
  }

  /**
   * Every breaker that is not CLOSED, with its location's site and name, by kind then location.
   *
   * @example
   * ```ts
   * const open = (await breakers.listNotClosed()).filter((b) => b.state === 'OPEN');
   * ```
   */
  async listNotClosed(): Promise<CircuitBreakerView[]> {
    const rows = await this.#exec.execute(sql`
      select b.*, l.site, l.name from circuit_breaker b
      left join data_location l on l.id = b.location_id
      where b.state <> 'CLOSED'
      order by b.kind, l.site, l.name, b.location_id`);
    return rows.map(toView);
  }

  /**
   * The rows of the given pairs plus every breaker that is not CLOSED (which a pass must look at
   * for its cooldown), in one statement.
   *
   * @example
   * ```ts
   * const rows = await breakers.loadForPass([{ kind, locationId }]);
   * ```
   */
  async loadForPass(
    pairs: readonly { kind: OperationKind; locationId: string }[],
  ): Promise<CircuitBreakerRecord[]> {
    const rows = await this.#exec.execute(sql`
      select b.* from circuit_breaker b
      where b.state <> 'CLOSED'
         or (b.kind, b.location_id) in (
           select p.kind, p.location_id
           from jsonb_to_recordset(${pairsJson(pairs)}::jsonb) as p(kind text, location_id uuid))`);
    return rows.map(toRecord);
  }

  /**
   * The highest transition id so far (0 when there is none): where a new breaker loop starts.
   *
   * @example
   * ```ts
   * let cursor = await breakers.latestTransitionId();
   * ```
   */
  latestTransitionId(): Promise<number> {
    return selectLatestTransitionId(this.#exec);
  }

  /**
   * Reads the transition rows with an id above `after` (at most `limit`, in id order), plus the
   * rows whose ids are listed in `gaps` (ids the caller skipped over because they were not yet
   * committed): every id read (so the caller can tell a gap from a row of another event), and
   * the FAIL rows among them with their pair and failure, and the COMPLETE rows with their pair
   * when one can change a breaker (some breaker is not CLOSED or has failures counted, or the page
   * holds a FAIL). One statement, one row back: the other events (three of an operation's four
   * transitions), and every COMPLETE while all breakers are clean, cost only their id.
   *
   * @example
   * ```ts
   * const { ids, outcomes } = await breakers.readOutcomes(cursor, [], 1024);
   * ```
   */
  async readOutcomes(
    after: number,
    gaps: readonly number[],
    limit: number,
  ): Promise<{ ids: number[]; outcomes: TransitionOutcome[] }> {
    const next = transitionsAfterCursor(
      after,
      gaps,
      limit,
      sql`id, event, operation_id, attempt, at, reason`,
    );
    // A COMPLETE changes nothing on a breaker that is CLOSED with no failures counted: unless a
    // breaker is not, or the page holds a FAIL (its pair's next COMPLETE resets the count), the
    // page's COMPLETE rows go back as ids only, without the lookup of their operation's pair. The
    // failure is looked up for FAIL rows only (`offset 0` keeps the lateral subquery whole, so its
    // test of the row's event is made once per row before the lookup, not after it).
    const [read] = await this.#exec.execute(sql`
      with t as materialized (${next})
      select
        (select coalesce(array_agg(id order by id), '{}') from t) as ids,
        (select coalesce(jsonb_agg(jsonb_build_object('id', t.id, 'event', t.event,
            'operation_id', t.operation_id, 'attempt', t.attempt, 'at', t.at, 'reason', t.reason,
            'kind', o.kind, 'target_location_id', o.target_location_id, 'error', fe.error)
            order by t.id), '[]')
          from t
          left join ${byKey('operation', 'o', 't.operation_id', 'o.kind, o.target_location_id')} on true
          left join lateral (select fe.error from operation_failure_event fe
            where t.event = 'FAIL' and fe.kind = o.kind
              and fe.operation_id = t.operation_id and fe.attempt = t.attempt
            offset 0) fe on true
          where t.event = 'FAIL'
             or (t.event = 'COMPLETE' and (
               exists (select 1 from t f where f.event = 'FAIL')
               or exists (select 1 from circuit_breaker b
                          where b.state <> 'CLOSED' or b.consecutive_failures > 0)))) as outcomes`);
    const idList = (read?.ids ?? []) as unknown[];
    const rows = json<Row[]>(read?.outcomes ?? []);
    const outcomes = rows.map((r): TransitionOutcome => {
      const event = String(r.event);
      const known = (event === 'FAIL' || event === 'COMPLETE') && r.target_location_id != null;
      const error =
        event !== 'FAIL'
          ? null
          : r.error != null
            ? json<{ message: string; retryable: boolean; code?: string }>(r.error)
            : { message: r.reason == null ? 'failed' : String(r.reason), retryable: true };
      return {
        id: Number(r.id),
        outcome: known ? (event as 'FAIL' | 'COMPLETE') : null,
        kind: r.kind == null ? null : (r.kind as OperationKind),
        locationId: r.target_location_id == null ? null : String(r.target_location_id),
        operationId: String(r.operation_id),
        attempt: Number(r.attempt),
        at: toDate(r.at) as Date,
        error,
      };
    });
    return { ids: idList.map(Number), outcomes };
  }

  /**
   * Writes breaker rows in one statement: inserts for new pairs, compare-and-set updates on
   * `version` for the others. Returns the rows that were written (a row that moved meanwhile,
   * e.g. an operator reset, is absent and unchanged), with their location's site and name.
   *
   * @example
   * ```ts
   * const written = await breakers.write([{ kind, locationId, expectedVersion: 3,
   *   state: 'OPEN', consecutiveFailures: 5, openedAt: now, lastFailure, updatedAt: now }]);
   * ```
   */
  async write(
    rows: readonly CircuitBreakerWrite[],
    fence?: LeaseFence,
  ): Promise<CircuitBreakerView[]> {
    if (rows.length === 0) return [];
    const input = JSON.stringify(
      rows.map((r) => ({
        kind: r.kind,
        location_id: r.locationId,
        expected_version: r.expectedVersion,
        state: r.state,
        consecutive_failures: r.consecutiveFailures,
        opened_at: r.openedAt?.toISOString() ?? null,
        last_failure: r.lastFailure,
        updated_at: r.updatedAt.toISOString(),
      })),
    );
    const written = await this.#exec.execute(sql`
      with i as (
        select kind, location_id, expected_version, state, consecutive_failures, opened_at,
          case when jsonb_typeof(last_failure) = 'null' then null else last_failure end
            as last_failure,
          updated_at
        from jsonb_to_recordset(${input}::jsonb) as i(kind text, location_id uuid,
          expected_version int, state text, consecutive_failures int, opened_at timestamptz,
          last_failure jsonb, updated_at timestamptz)
        where ${leaseHolds(fence)}
      ),
      ins as (
        insert into circuit_breaker (kind, location_id, state, consecutive_failures, opened_at,
          last_failure, version, updated_at)
        select kind, location_id, state, consecutive_failures, opened_at, last_failure, 1,
          updated_at
        from i where expected_version is null
        on conflict (kind, location_id) do nothing
        returning *
      ),
      upd as (
        update circuit_breaker b set state = i.state,
          consecutive_failures = i.consecutive_failures, opened_at = i.opened_at,
          last_failure = i.last_failure, version = b.version + 1, updated_at = i.updated_at
        from i
        where i.expected_version is not null and b.kind = i.kind
          and b.location_id = i.location_id and b.version = i.expected_version
        returning b.*
      )
      select w.*, l.site, l.name
      from (select * from ins union all select * from upd) w
      left join data_location l on l.id = w.location_id`);
    return written.map(toView);
  }

  /**
   * Closes a breaker (an operator's decision): zero failures, not open. Returns the breaker as it
   * was before, or null when the pair has no breaker. `BAD_INPUT` for an unknown kind or a
   * malformed location id.
   *
   * @example
   * ```ts
   * const before = await breakers.reset(OperationKind.LONG_TERM_ARCHIVE, archiveId);
   * ```
   */
  async reset(
    kind: string,
    locationId: string,
    now: Date = new Date(systemClock.now()),
  ): Promise<CircuitBreakerView | null> {
    if (!isOperationKind(kind)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `unknown operation kind ${JSON.stringify(kind)}; use one of ${OPERATION_KINDS.join(', ')}`,
      );
    }
    if (!isUuid(locationId)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `location id '${locationId}' is not a uuid; see \`opstate status\` for the breakers' locations`,
      );
    }
    const [row] = await this.#exec.execute(sql`
      with old as (
        select * from circuit_breaker
        where kind = ${kind} and location_id = ${locationId}::uuid
        for update
      ),
      upd as (
        update circuit_breaker b set state = ${CircuitState.CLOSED}, consecutive_failures = 0,
          opened_at = null, version = b.version + 1, updated_at = ${now.toISOString()}::timestamptz
        from old where b.kind = old.kind and b.location_id = old.location_id
        returning b.kind
      )
      select old.*, l.site, l.name from old
      left join data_location l on l.id = old.location_id
      where exists (select 1 from upd)`);
    return row === undefined ? null : toView(row);
  }
}
