import { type SQL, sql } from 'drizzle-orm';
import {
  type AttentionBreakerRow,
  AttentionCategory,
  type AttentionOperationRow,
} from '../../machines/attention.ts';
import { DEADLINE_NEAR_FRACTION, type Deadlines } from '../../machines/deadlines.ts';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { operationErrorOf } from '../UnreadableValue.ts';
import { LIVE_STATUSES } from './admitWithinLimits.ts';
import { runPastShareOfDeadline } from './selectPastDeadline.ts';

/** Where a page starts: after this (since, id), in (since, id) order. */
export interface AttentionCursor {
  readonly since: Date;
  readonly id: string;
}

export interface AttentionPage {
  readonly limit: number;
  readonly after?: AttentionCursor | undefined;
}

/**
 * The heartbeats the stuck rule knows, as held attempts (`<operation id>:<attempt>`): those a
 * worker with a live heartbeat holds, and those held only by workers whose heartbeats went stale.
 */
export interface HeartbeatIds {
  readonly alive: readonly string[];
  readonly stale: readonly string[];
}

/** A text[] literal of keys that hold only letters, digits, '-' and ':' (checked by the caller). */
const texts = (keys: readonly string[]) => `{${keys.join(',')}}`;

/**
 * When a PENDING operation became due: when it entered PENDING, or its backoff's end if later
 * (the expression of the `operation_pending_due_idx` index).
 */
const PENDING_SINCE = sql.raw('greatest(o.not_before, o.status_changed_at)');

/** When the operation entered its current status (for PENDING: became due). */
const STATUS_SINCE = sql.raw(`case when o.status = 'PENDING'
  then greatest(o.not_before, o.status_changed_at) else o.status_changed_at end`);

/**
 * A PENDING operation the scheduler holds on purpose: its breaker is not CLOSED, or a flow limit of
 * its (kind, location) or of its location is full (live work at or above the limit, 0 included).
 */
const PARKED = sql.raw(`(exists (select 1 from circuit_breaker b where b.kind = o.kind
  and b.location_id = o.target_location_id and b.state <> 'CLOSED')
  or exists (select 1 from flow_limit f
    where f.location_id = o.target_location_id and (f.kind is null or f.kind = o.kind)
      and f.max_live <= (select count(*) from operation p
        where p.target_location_id = f.location_id and (f.kind is null or p.kind = f.kind)
          and p.${LIVE_STATUSES})))`);

const COLUMNS = sql.raw(`o.id, o.kind, o.status, o.attempt, o.retry_count, o.max_retries,
  o.worker_id, o.last_error, o.deadline_ms`);

function after(page: AttentionPage, since: SQL, newestFirst = false): SQL {
  if (page.after === undefined) return sql`true`;
  const cursor = sql`(${page.after.since.toISOString()}::timestamptz, ${page.after.id}::uuid)`;
  return newestFirst ? sql`(${since}, o.id) < ${cursor}` : sql`(${since}, o.id) > ${cursor}`;
}

function toOperationRow(r: Row): AttentionOperationRow {
  return {
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    attempt: Number(r.attempt),
    retryCount: Number(r.retry_count),
    maxRetries: Number(r.max_retries),
    since: toDate(r.since) as Date,
    workerId: r.worker_id == null ? null : String(r.worker_id),
    lastError: r.last_error == null ? null : operationErrorOf(r.last_error),
    parked: r.parked === true,
    deadlineMs: r.deadline_ms == null ? null : Number(r.deadline_ms),
  };
}

type StuckCutoffs = { readonly floorCutoff: Date; readonly heartbeatCutoff: Date };

/** `<operation id>:<attempt>` of row `o`, as heartbeats name what they hold. */
const HELD = sql.raw(`(o.id::text || ':' || o.attempt::text)`);

/** The three branches of the stuck rule, each with its own since column and index. */
function stuckBranches(cutoffs: StuckCutoffs, heartbeats: HeartbeatIds | null) {
  const floor = cutoffs.floorCutoff.toISOString();
  // SCHEDULED and IN_PROGRESS alike: held by no live worker, and past the floor — or, held by
  // workers whose heartbeats went stale, past the heartbeat timeout.
  const held = (since: string) =>
    heartbeats === null
      ? sql`${sql.raw(since)} < ${floor}::timestamptz`
      : sql`not (${HELD} = any(${texts(heartbeats.alive)}::text[]))
          and (${sql.raw(since)} < ${floor}::timestamptz
            or (${sql.raw(since)} < ${cutoffs.heartbeatCutoff.toISOString()}::timestamptz
                and ${HELD} = any(${texts(heartbeats.stale)}::text[])))`;
  return [
    {
      since: PENDING_SINCE,
      where: sql`o.status = 'PENDING' and ${PENDING_SINCE} < ${floor}::timestamptz
        and not ${PARKED}`,
    },
    {
      since: sql.raw('o.scheduled_at'),
      where: sql`o.status = 'SCHEDULED' and ${held('o.scheduled_at')}`,
    },
    {
      since: sql.raw('o.started_at'),
      where: sql`o.status = 'IN_PROGRESS' and ${held('o.started_at')}`,
    },
  ];
}

/**
 * Live operations past the timer that should have moved them, oldest first: PENDING due before
 * `floorCutoff` and not parked by a breaker or a full flow limit; SCHEDULED or IN_PROGRESS held by no live worker
 * since before `floorCutoff`, or held only by stale workers since before `heartbeatCutoff` (with
 * `heartbeats` null, only the floor applies).
 * Each branch starts from an index (the due and active partial indexes); `classifyOperation`
 * decides the same from each row.
 */
export async function selectStuck(
  exec: Executor,
  cutoffs: StuckCutoffs,
  heartbeats: HeartbeatIds | null,
  page: AttentionPage,
): Promise<AttentionOperationRow[]> {
  const branches = stuckBranches(cutoffs, heartbeats).map(
    (b) => sql`(select ${COLUMNS}, ${b.since} as since, false as parked from operation o
      where ${b.where} and ${after(page, b.since)} order by since, o.id limit ${page.limit})`,
  );
  const rows = await exec.execute(sql`
    select * from (${sql.join(branches, sql` union all `)}) s
    order by since, id limit ${page.limit}`);
  return rows.map(toOperationRow);
}

/**
 * Counts stop at this many rows per branch: past it a count costs as much as the rows it counts,
 * and "more than 1,000" says enough.
 */
export const ATTENTION_COUNT_CAP = 1_000;

export const capped = (from: SQL) =>
  sql`(select count(*)::int from (select 1 ${from} limit ${ATTENTION_COUNT_CAP + 1}) c)`;

/** How many operations `selectStuck` lists over all its pages (each branch capped). */
export async function countStuck(
  exec: Executor,
  cutoffs: StuckCutoffs,
  heartbeats: HeartbeatIds | null,
): Promise<number> {
  const counts = stuckBranches(cutoffs, heartbeats).map((b) =>
    capped(sql`from operation o where ${b.where}`),
  );
  const [row] = await exec.execute(sql`select ${sql.join(counts, sql` + `)} as n`);
  return Number(row?.n ?? 0);
}

/** IN_PROGRESS attempts past `DEADLINE_NEAR_FRACTION` of their deadline at `now`. */
const nearDeadline = (now: Date, deadlines: Deadlines) =>
  runPastShareOfDeadline(now, deadlines, DEADLINE_NEAR_FRACTION);

/**
 * IN_PROGRESS attempts that have run for most of their deadline or past it (the operation's own,
 * else its kind's), longest running first; off the live index (status, started_at).
 */
export async function selectNearDeadline(
  exec: Executor,
  now: Date,
  deadlines: Deadlines,
  page: AttentionPage,
): Promise<AttentionOperationRow[]> {
  const since = sql.raw('o.started_at');
  const rows = await exec.execute(sql`
    select ${COLUMNS}, o.started_at as since, false as parked from operation o
    where ${nearDeadline(now, deadlines)} and ${after(page, since)}
    order by o.started_at, o.id limit ${page.limit}`);
  return rows.map(toOperationRow);
}

/** How many attempts `selectNearDeadline` lists over all its pages (capped). */
export async function countNearDeadline(
  exec: Executor,
  now: Date,
  deadlines: Deadlines,
): Promise<number> {
  const [row] = await exec.execute(
    sql`select ${capped(sql`from operation o where ${nearDeadline(now, deadlines)}`)} as n`,
  );
  return Number(row?.n ?? 0);
}

/** Live operations that have spent their retry budget (a partial index holds exactly them). */
export async function selectRetryCap(
  exec: Executor,
  page: AttentionPage,
): Promise<AttentionOperationRow[]> {
  const rows = await exec.execute(sql`
    select * from (
      select ${COLUMNS}, ${STATUS_SINCE} as since, ${PARKED} as parked from operation o
      where o.status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS') and o.retry_count > 0
        and o.retry_count >= o.max_retries
    ) o where ${after(page, sql.raw('o.since'))}
    order by o.since, o.id limit ${page.limit}`);
  return rows.map(toOperationRow);
}

const FAILED = sql.raw(
  `o.status = 'FAILED' and coalesce(o.last_error->>'code', '') <> 'CANCELLED'`,
);

/**
 * FAILED operations an operator has not cancelled, newest failure first (a failure stays FAILED
 * until it is retried, so the oldest would otherwise fill the first page forever); partial index.
 */
export async function selectFailed(
  exec: Executor,
  page: AttentionPage,
): Promise<AttentionOperationRow[]> {
  const rows = await exec.execute(sql`
    select ${COLUMNS}, o.finished_at as since, false as parked from operation o
    where ${FAILED} and ${after(page, sql.raw('o.finished_at'), true)}
    order by o.finished_at desc, o.id desc limit ${page.limit}`);
  return rows.map(toOperationRow);
}

/** The categories counted in one statement, each from a partial index (`countIndexed`). */
export const INDEXED_CATEGORIES = [
  AttentionCategory.RETRY_CAP,
  AttentionCategory.FAILED,
  AttentionCategory.DELETION_FAILED,
] as const;
export type IndexedCategory = (typeof INDEXED_CATEGORIES)[number];

/** Each indexed category's count, its column named after the category. */
const INDEXED_COUNTS: Readonly<Record<IndexedCategory, SQL>> = {
  retry_cap: sql`from operation o where o.status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS')
    and o.retry_count > 0 and o.retry_count >= o.max_retries`,
  failed: sql`from operation o where ${FAILED}`,
  deletion_failed: sql`from physical_copy c where c.status = 'DELETION_FAILED'`,
};

/** Counts of the categories whose rows a partial index holds (each capped), by category. */
export async function countIndexed(exec: Executor): Promise<Record<IndexedCategory, number>> {
  const columns = sql.join(
    INDEXED_CATEGORIES.map((c) => sql`${capped(INDEXED_COUNTS[c])} as ${sql.identifier(c)}`),
    sql`, `,
  );
  const [row] = await exec.execute(sql`select ${columns}`);
  return Object.fromEntries(INDEXED_CATEGORIES.map((c) => [c, Number(row?.[c] ?? 0)])) as Record<
    IndexedCategory,
    number
  >;
}

/** Every circuit breaker that is not CLOSED, with how many PENDING operations it parks. */
export async function selectBreakersNotClosed(exec: Executor): Promise<AttentionBreakerRow[]> {
  const rows = await exec.execute(sql`
    select b.kind, b.location_id, b.state, b.consecutive_failures, b.opened_at,
      b.last_failure->>'message' as last_message, l.site, l.name,
      (select count(*)::int from operation o where o.status = 'PENDING' and o.kind = b.kind
        and o.target_location_id = b.location_id) as parked
    from circuit_breaker b left join data_location l on l.id = b.location_id
    where b.state <> 'CLOSED'
    order by b.opened_at, b.kind, b.location_id`);
  return rows.map((r) => ({
    kind: r.kind as OperationKind,
    locationId: String(r.location_id),
    location: r.site == null ? String(r.location_id) : `${String(r.site)}/${String(r.name)}`,
    state: String(r.state),
    consecutiveFailures: Number(r.consecutive_failures),
    openedAt: toDate(r.opened_at),
    lastFailureMessage: r.last_message == null ? null : String(r.last_message),
    parked: Number(r.parked),
  }));
}

/** One operation in the shape the attention rules take (its operation page classifies it). */
export async function selectAttentionRow(
  exec: Executor,
  id: string,
): Promise<AttentionOperationRow | undefined> {
  const [row] = await exec.execute(sql`
    select ${COLUMNS}, ${STATUS_SINCE} as since, ${PARKED} as parked from operation o
    where o.id = ${id}::uuid`);
  return row === undefined ? undefined : toOperationRow(row);
}
