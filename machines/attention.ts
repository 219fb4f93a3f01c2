import {
  DEADLINE_NEAR_FRACTION,
  type Deadlines,
  deadlineOf,
  describeDeadline,
  formatRunTime,
} from './deadlines.ts';
import { OPERATION_KINDS, OperationKind } from './OperationKind.ts';
import { type OperationError, OperationStatus } from './operationMachine.ts';
import {
  DEFAULT_OPERATION_TYPE,
  defaultRoute,
  isSiteRoute,
  queueName,
  type Route,
  routeOfQueue,
} from './routing.ts';

/**
 * What an operator must look at, by category. Each category is one rule below; the dashboard
 * and `opstate status` show the same list because both go through `classifyOperation`,
 * `classifyBreaker`, `classifyArchive` and `classifyCopy`.
 */
export const AttentionCategory = {
  /** A live operation past the timer that should have moved it (scheduler, monitor, reconciler). */
  STUCK: 'stuck',
  /**
   * An attempt IN_PROGRESS for more than `DEADLINE_NEAR_FRACTION` of its deadline (nearing it:
   * the worker aborts the handler and the deadline path resets it at the deadline), or past it
   * (the deadline path should have reset it).
   */
  DEADLINE: 'deadline',
  /**
   * A queue with dispatches waiting and no live worker serving it: no heartbeat younger than the
   * timeout names it among the queues its worker reads (or, while a live worker's heartbeat does
   * not say which it reads, none lists work from it and its oldest dispatch has waited longer).
   */
  QUEUE_UNSERVED: 'queue_unserved',
  /** A live operation that has spent its retry budget: its next failure or reset FAILS it. */
  RETRY_CAP: 'retry_cap',
  /** FAILED and not cancelled by an operator: it stays listed until it is retried. */
  FAILED: 'failed',
  /** A circuit breaker that is not CLOSED: the pair's PENDING operations are parked. */
  BREAKER_OPEN: 'breaker_open',
  /**
   * An archive that stopped short of VERIFIED: another object at its key (never overwritten) or
   * an object that does not read back as written. The source is kept.
   */
  ARCHIVE_CONFLICT: 'archive_conflict',
  /**
   * A source deletion that failed or is blocked: members kept with their reasons, or interrupted
   * too often. The copy is kept.
   */
  DELETION_FAILED: 'deletion_failed',
  /** A deletion in progress whose deleter's lease ran out and that no deleter took over. */
  DELETION_STALLED: 'deletion_stalled',
  /**
   * A raw data package whose files were declared complete, one of which has no PRESENT copy at
   * the declared location any more: a declared pipeline does not create its packaging until it has.
   */
  ENTRY_WAITING: 'entry_waiting',
} as const;
export type AttentionCategory = (typeof AttentionCategory)[keyof typeof AttentionCategory];
export const ATTENTION_CATEGORIES: readonly AttentionCategory[] = Object.freeze(
  Object.values(AttentionCategory),
);

/** How each category is titled, on the dashboard and in `opstate status`. */
export const ATTENTION_TITLES: Readonly<Record<AttentionCategory, string>> = Object.freeze({
  stuck: 'Stuck past their timers',
  deadline: 'Near or past their deadline',
  queue_unserved: 'Queues no live worker serves',
  retry_cap: 'At the retry cap',
  failed: 'Failed',
  breaker_open: 'Circuit breakers open',
  archive_conflict: 'Archive conflicts',
  deletion_failed: 'Deletions failed or blocked',
  deletion_stalled: 'Deletions stalled',
  entry_waiting: 'Declared packages waiting on a file',
});

/** One line of the attention list. */
export interface AttentionItem {
  readonly category: AttentionCategory;
  /**
   * What it is about: an operation, a breaker (`<kind>|<location id>`), a copy, a queue (its
   * name) or a raw data package.
   */
  readonly subject: {
    readonly type: 'operation' | 'breaker' | 'copy' | 'queue' | 'package';
    readonly id: string;
  };
  readonly kind: OperationKind | null;
  /** The operation's status, the breaker's state, the copy's status or `UNSERVED` (a queue). */
  readonly state: string;
  /** Since when the condition holds (ISO): the clock the rule measured. */
  readonly since: string;
  /** Why it is on the list and what to do, in one sentence. */
  readonly why: string;
  /** A FAILED stage of a declared pipeline: the packages whose branch it stops. */
  readonly waiting?: FailedHold;
}

/**
 * What waits on a pipeline stage that failed for good: the packages whose later stages the
 * pipeline does not create until it is retried, and the artifact it acts on.
 */
export interface FailedHold {
  /** How many raw data packages wait on it. */
  readonly packages: number;
  /** The data transfer package whose members wait (a bundling, transfer or unpack, or a packaging of a member). */
  readonly dataTransferPackageId: string | null;
  /** The raw data package it acts on (a packaging or a long-term archive). */
  readonly rawDataPackageId: string | null;
}

/**
 * A FAILED item with what waits on it: `waiting` set, and its `why` saying so.
 *
 * @example
 * ```ts
 * withHold(item, { packages: 10, dataTransferPackageId: 'dtp-1', rawDataPackageId: null }).why;
 * // 'FAILED at attempt 3: disk full; retry it once the cause is fixed; 10 packages wait on it (data transfer package dtp-1): …'
 * ```
 */
export function withHold(item: AttentionItem, hold: FailedHold): AttentionItem {
  const whose =
    hold.dataTransferPackageId !== null
      ? `data transfer package ${hold.dataTransferPackageId}`
      : `raw data package ${hold.rawDataPackageId ?? 'unknown'}`;
  const count = hold.packages === 1 ? '1 package waits' : `${hold.packages} packages wait`;
  return {
    ...item,
    waiting: hold,
    why: `${item.why}; ${count} on it (${whose}): the pipeline creates none of their later stages until it is retried`,
  };
}

/** The timers the rules measure against (a runtime's, so the list agrees with its recovery). */
export interface AttentionTiming {
  readonly heartbeatTimeoutMs: number;
  readonly reconcilerFloorMs: number;
  /** Each kind's deadline per attempt (an operation's own `deadlineMs` wins). */
  readonly deadlines: Deadlines;
}

/** An operation as the attention queries select it. */
export interface AttentionOperationRow {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly retryCount: number;
  readonly maxRetries: number;
  /**
   * When it entered its current status; for PENDING, when it became due (its last transition,
   * or the end of its retry backoff if that is later).
   */
  readonly since: Date;
  readonly workerId: string | null;
  readonly lastError: OperationError | null;
  /** PENDING only: a circuit breaker that is not CLOSED holds its (kind, target) pair. */
  readonly parked: boolean;
  /** The operation's own deadline per attempt (ms) from submit; null: its kind's. */
  readonly deadlineMs: number | null;
}

/**
 * What is known about heartbeats where the list is computed: per operation attempt
 * (`heldKey(id, attempt)`), the newest heartbeat of a worker that holds it (ms); or `null` when
 * heartbeats are not visible from here (an in-process transport in another process), so that
 * only the reconciler floor can say a SCHEDULED or IN_PROGRESS operation is stuck.
 */
export type HeartbeatFacts = ReadonlyMap<string, number> | null;

/** The key of one operation attempt in `HeartbeatFacts`. */
export function heldKey(operationId: string, attempt: number): string {
  return `${operationId}:${attempt}`;
}

/** A worker heartbeat as the heartbeat store lists it: when, and which attempts it holds. */
export interface HeldBeat {
  readonly at: number;
  readonly held: readonly { readonly operationId: string; readonly attempt: number }[];
}

/**
 * Folds worker heartbeats into `HeartbeatFacts`: for each attempt held, its newest heartbeat.
 *
 * @example
 * ```ts
 * const facts = heartbeatFacts(await runtime.transport.heartbeats.list());
 * ```
 */
export function heartbeatFacts(beats: readonly HeldBeat[]): Map<string, number> {
  const facts = new Map<string, number>();
  for (const beat of beats) {
    for (const h of beat.held) {
      const key = heldKey(h.operationId, h.attempt);
      facts.set(key, Math.max(facts.get(key) ?? 0, beat.at));
    }
  }
  return facts;
}

export interface AttentionFacts {
  readonly now: number;
  readonly timing: AttentionTiming;
  readonly heartbeats: HeartbeatFacts;
}

const LIVE: ReadonlySet<string> = new Set([
  OperationStatus.PENDING,
  OperationStatus.SCHEDULED,
  OperationStatus.IN_PROGRESS,
]);

/** `95 s`, `12 min`, `3.5 h`, `2.0 d`: an age an operator reads at a glance. */
export function formatAge(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86_400).toFixed(1)} d`;
}

/**
 * The cut-off times the attention queries select candidates by, so that the SQL asks exactly
 * what the rules below decide: older than the reconciler floor, or than the heartbeat timeout.
 *
 * @example
 * ```ts
 * const { floorCutoff, heartbeatCutoff } = attentionCutoffs(clock.now(), runtime.timing);
 * ```
 */
export function attentionCutoffs(
  now: number,
  timing: AttentionTiming,
): { readonly floorCutoff: Date; readonly heartbeatCutoff: Date } {
  return {
    floorCutoff: new Date(now - timing.reconcilerFloorMs),
    heartbeatCutoff: new Date(now - timing.heartbeatTimeoutMs),
  };
}

function stuckReason(row: AttentionOperationRow, facts: AttentionFacts): string | null {
  const { now, timing, heartbeats } = facts;
  const floor = timing.reconcilerFloorMs;
  const age = now - row.since.getTime();
  if (row.status === OperationStatus.PENDING) {
    if (row.parked || age <= floor) return null; // a parked pair's breaker is the item to look at
    return `PENDING and due for ${formatAge(age)} (longer than the reconciler floor, ${formatAge(floor)}) without being scheduled: is a control-plane leader running, or is the backlog deeper than maxScheduled lets through?`;
  }
  if (row.status !== OperationStatus.SCHEDULED && row.status !== OperationStatus.IN_PROGRESS) {
    return null;
  }
  // Held by a worker (a dispatch pulled, or running): the heartbeat monitor's case; held by none:
  // the reconciler's. Both judge the current attempt only.
  const beat = heartbeats?.get(heldKey(row.id, row.attempt));
  const what =
    row.status === OperationStatus.SCHEDULED
      ? 'SCHEDULED'
      : `IN_PROGRESS on ${row.workerId ?? 'an unknown worker'}`;
  if (beat !== undefined) {
    if (now - beat < timing.heartbeatTimeoutMs || age <= timing.heartbeatTimeoutMs) return null;
    return `${what} and held by a worker whose last heartbeat was ${formatAge(now - beat)} ago (timeout ${formatAge(timing.heartbeatTimeoutMs)}); the heartbeat monitor should have reset it: is a control-plane leader running?`;
  }
  if (age <= floor) return null;
  return heartbeats === null
    ? `${what} for ${formatAge(age)} (longer than the reconciler floor, ${formatAge(floor)}); heartbeats are not visible from here, so check the workers`
    : `${what} for ${formatAge(age)} and held by no live worker (reconciler floor ${formatAge(floor)}); the reconciler should have reset it: is a control-plane leader running${row.status === OperationStatus.SCHEDULED ? `, and a worker for ${row.kind}` : ''}?`;
}

/**
 * An attempt IN_PROGRESS for at least `DEADLINE_NEAR_FRACTION` of its deadline, counted from its
 * START (`since`): nearing it, or past it.
 */
function deadlineReason(row: AttentionOperationRow, facts: AttentionFacts): string | null {
  if (row.status !== OperationStatus.IN_PROGRESS) return null;
  const deadline = deadlineOf(row.kind, row.deadlineMs, facts.timing.deadlines);
  const ran = facts.now - row.since.getTime();
  if (ran < DEADLINE_NEAR_FRACTION * deadline.ms) return null;
  const what = `IN_PROGRESS on ${row.workerId ?? 'an unknown worker'} at attempt ${row.attempt} for ${formatRunTime(ran)}`;
  const of = describeDeadline(row.kind, deadline);
  if (ran < deadline.ms) {
    return `${what}, ${Math.floor((ran / deadline.ms) * 100)} % of its deadline of ${of}: at the deadline its handler is aborted and the deadline path resets it; check what the handler waits on (a storage or tape call that does not return?)`;
  }
  return `${what}, past its deadline of ${of} by ${formatRunTime(ran - deadline.ms)}; the deadline path should have reset it: is a control-plane leader running?`;
}

/**
 * The attention items of one operation (none, one or several categories), decided from its row
 * alone. These are the rules; the queries only pre-select rows by the same cut-offs.
 *
 * @example
 * ```ts
 * classifyOperation(row, { now: clock.now(), timing: runtime.timing, heartbeats: null })
 *   .map((item) => item.category); // ['stuck', 'retry_cap']
 * ```
 */
export function classifyOperation(
  row: AttentionOperationRow,
  facts: AttentionFacts,
): AttentionItem[] {
  const items: AttentionItem[] = [];
  const base = {
    subject: { type: 'operation' as const, id: row.id },
    kind: row.kind,
    state: row.status,
    since: row.since.toISOString(),
  };
  const stuck = stuckReason(row, facts);
  if (stuck !== null) items.push({ ...base, category: AttentionCategory.STUCK, why: stuck });
  const late = deadlineReason(row, facts);
  if (late !== null) items.push({ ...base, category: AttentionCategory.DEADLINE, why: late });
  if (LIVE.has(row.status) && row.retryCount > 0 && row.retryCount >= row.maxRetries) {
    items.push({
      ...base,
      category: AttentionCategory.RETRY_CAP,
      why: `${row.status} at attempt ${row.attempt} with its retry budget spent (${row.retryCount}/${row.maxRetries}): its next failure or reset FAILS it${row.lastError === null ? '' : `; last error: ${row.lastError.message}`}`,
    });
  }
  if (row.status === OperationStatus.FAILED && row.lastError?.code !== 'CANCELLED') {
    items.push({
      ...base,
      category: AttentionCategory.FAILED,
      why: `FAILED at attempt ${row.attempt}: ${row.lastError?.message ?? 'no error recorded'}; retry it once the cause is fixed`,
    });
  }
  return items;
}

/** A circuit breaker as the attention query selects it. */
export interface AttentionBreakerRow {
  readonly kind: OperationKind;
  readonly locationId: string;
  /** `site/name` of the location. */
  readonly location: string;
  readonly state: string;
  readonly consecutiveFailures: number;
  readonly openedAt: Date | null;
  readonly lastFailureMessage: string | null;
  /** PENDING operations of the pair that the scheduler leaves where they are. */
  readonly parked: number;
}

/**
 * The attention item of a circuit breaker: every breaker that is not CLOSED.
 *
 * @example
 * ```ts
 * classifyBreaker({ ...row, state: 'OPEN' })?.category; // 'breaker_open'
 * ```
 */
export function classifyBreaker(row: AttentionBreakerRow): AttentionItem | null {
  if (row.state === 'CLOSED') return null;
  const probing = row.state === 'HALF_OPEN' ? 'letting one probe through' : 'parking the pair';
  return {
    category: AttentionCategory.BREAKER_OPEN,
    subject: { type: 'breaker', id: `${row.kind}|${row.locationId}` },
    kind: row.kind,
    state: row.state,
    since: (row.openedAt ?? new Date(0)).toISOString(),
    why: `${row.kind} at ${row.location} is ${row.state} after ${row.consecutiveFailures} consecutive failures (${probing}; ${row.parked} PENDING parked)${row.lastFailureMessage === null ? '' : `; last error: ${row.lastFailureMessage}`}; fix the location, then \`opstate breaker reset ${row.kind} ${row.locationId}\``,
  };
}

/** A routing queue as the attention query sees it: its dispatches waiting, and who serves it. */
export interface AttentionQueueRow {
  readonly route: Route;
  /** SCHEDULED operations of the queue: dispatched, not started. */
  readonly waiting: number;
  /** When the longest-waiting of them was scheduled; null when none waits. */
  readonly oldestWaiting: Date | null;
  /** Whether a worker whose heartbeat is younger than the timeout holds work from the queue. */
  readonly served: boolean;
  /** The workers whose heartbeat, younger than the timeout, names the queue among those they read. */
  readonly readers: readonly string[];
  /**
   * Whether every heartbeat younger than the timeout says which queues its worker reads; false
   * while one does not (an older worker), or when heartbeats were not read (`readersOf`).
   */
  readonly readersKnown: boolean;
}

/**
 * The kinds a worker for this queue is started with: for a site queue, those dispatched as its
 * operation type; for a legacy one, those whose legacy default route it is.
 *
 * @example
 * ```ts
 * kindsOfQueue('cologne_buffer_buffer_data_transfer'); // [OperationKind.TRANSFER]
 * ```
 */
export function kindsOfQueue(queue: string): OperationKind[] {
  const route = routeOfQueue(queue);
  if (route === undefined) return [];
  return isSiteRoute(route)
    ? OPERATION_KINDS.filter((k) => DEFAULT_OPERATION_TYPE[k] === route.operationType)
    : OPERATION_KINDS.filter((k) => queueName(defaultRoute(k)) === queue);
}

/**
 * The attention item of a queue that has dispatches waiting and no live worker serving it. A
 * queue is served when a live heartbeat names it among the queues its worker reads (idle or not),
 * or lists work from it; with neither, it is listed at once. While some live heartbeat does not
 * say which queues its worker reads (`readersKnown` false: an older worker), that worker may serve
 * the queue idle, and would have pulled the oldest dispatch well within the heartbeat timeout, so
 * only a queue whose oldest dispatch has waited longer than that is listed. With heartbeats not
 * visible (`facts.heartbeats` null) nothing is.
 *
 * @example
 * ```ts
 * classifyQueue({ route, waiting: 3, oldestWaiting, served: false, readers: [], readersKnown: true }, facts)?.why;
 * // 'no live worker serves queue buffer_data_transfer_unpacking (3 waiting, the oldest for 12 min): …'
 * ```
 */
export function classifyQueue(row: AttentionQueueRow, facts: AttentionFacts): AttentionItem | null {
  if (
    facts.heartbeats === null ||
    row.served ||
    row.readers.length > 0 ||
    row.waiting === 0 ||
    row.oldestWaiting === null
  ) {
    return null;
  }
  const waited = facts.now - row.oldestWaiting.getTime();
  if (!row.readersKnown && waited <= facts.timing.heartbeatTimeoutMs) return null;
  const queue = queueName(row.route);
  const kinds = kindsOfQueue(queue);
  const site = isSiteRoute(row.route) ? ` --site ${row.route.site}` : '';
  const start =
    kinds.length === 0
      ? 'start a worker whose routes include it'
      : `start a worker for it (\`opstate worker${site} --kinds ${kinds.join(',')} --handlers …\`)`;
  return {
    category: AttentionCategory.QUEUE_UNSERVED,
    subject: { type: 'queue', id: queue },
    kind: kinds.length === 1 ? (kinds[0] as OperationKind) : null,
    state: 'UNSERVED',
    since: row.oldestWaiting.toISOString(),
    why: row.readersKnown
      ? `no live worker serves queue ${queue} (${row.waiting} waiting, the oldest for ${formatAge(waited)}): no heartbeat younger than ${formatAge(facts.timing.heartbeatTimeoutMs)} names it among the queues its worker reads; ${start}`
      : `no live worker serves queue ${queue} (${row.waiting} waiting, the oldest for ${formatAge(waited)}): no heartbeat younger than ${formatAge(facts.timing.heartbeatTimeoutMs)} lists work from it; ${start}, or, if its workers are busy on other queues, give them more --concurrency`,
  };
}

/** A physical copy as the attention queries select it. */
export interface AttentionCopyRow {
  readonly id: string;
  readonly artifactType: string;
  readonly artifactId: string;
  /** `site/name` of its location. */
  readonly location: string;
  readonly status: string;
  readonly deletionFailureCount: number;
  readonly lastError: string | null;
  /** When it entered its status (DELETION_FAILED), or when its deleter's lease ran out (stalled). */
  readonly since: Date;
  /** The archive operation its latest deletion plan relies on (its resume record says more). */
  readonly archiveOperationId: string | null;
  /** Members of the latest plan that were kept, with the reason each was kept. */
  readonly kept: readonly { readonly name: string; readonly reason: string | null }[];
  /** DELETION_IN_PROGRESS only: the deleter holding (or last holding) the lease. */
  readonly holder: string | null;
}

/**
 * The attention item of a copy: a deletion that failed or is blocked (DELETION_FAILED: the copy is
 * kept; with the kept members' reasons), or one stalled (DELETION_IN_PROGRESS whose lease ran out
 * longer than the heartbeat timeout ago with no deleter taking over).
 *
 * @example
 * ```ts
 * classifyCopy({ ...row, status: 'DELETION_FAILED' }, facts)?.category; // 'deletion_failed'
 * ```
 */
export function classifyCopy(
  row: AttentionCopyRow,
  facts: Pick<AttentionFacts, 'now' | 'timing'>,
): AttentionItem | null {
  const base = {
    subject: { type: 'copy' as const, id: row.id },
    kind: null,
    state: row.status,
    since: row.since.toISOString(),
  };
  const review =
    row.archiveOperationId === null
      ? ''
      : `; see \`opstate inspect ${row.archiveOperationId}\`, and after review \`opstate retry ${row.archiveOperationId} --replan\``;
  if (row.status === 'DELETION_FAILED') {
    const why =
      row.kept.length > 0
        ? `deletion of the ${row.artifactType} copy at ${row.location} is blocked, the copy is kept: ${row.kept.length} member(s) kept — ${row.kept.map((k) => `${k.name}: ${k.reason ?? 'no reason recorded'}`).join('; ')}`
        : `deletion of the ${row.artifactType} copy at ${row.location} failed ${row.deletionFailureCount} time(s), the copy is kept: ${row.lastError ?? 'no error recorded'}`;
    return { ...base, category: AttentionCategory.DELETION_FAILED, why: why + review };
  }
  if (row.status === 'DELETION_IN_PROGRESS') {
    const lapsed = facts.now - row.since.getTime();
    if (lapsed <= facts.timing.heartbeatTimeoutMs) return null;
    return {
      ...base,
      category: AttentionCategory.DELETION_STALLED,
      why: `deletion of the ${row.artifactType} copy at ${row.location} stalled: the lease of ${row.holder ?? 'its deleter'} ran out ${formatAge(lapsed)} ago and no deleter took over: is one running (\`opstate worker --delete-copies\`)?${review}`,
    };
  }
  return null;
}

/** An archive operation whose last durable archive state stopped it short of VERIFIED. */
export interface AttentionArchiveRow {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  /** The last durable archive state: `CONFLICT` or `VERIFY_FAILED` (anything else is not listed). */
  readonly archiveState: string;
  readonly archiveKey: string | null;
  readonly since: Date;
  readonly lastError: OperationError | null;
}

/**
 * The attention item of an archive that stopped short of VERIFIED: another object at its key
 * (a conflict, never an overwrite) or an object that does not read back. The source is kept.
 *
 * @example
 * ```ts
 * classifyArchive({ ...row, archiveState: 'CONFLICT' })?.category; // 'archive_conflict'
 * ```
 */
export function classifyArchive(row: AttentionArchiveRow): AttentionItem | null {
  if (row.archiveState !== 'CONFLICT' && row.archiveState !== 'VERIFY_FAILED') return null;
  const what =
    row.archiveState === 'CONFLICT'
      ? `another object is at the archive key ${row.archiveKey ?? '(unknown)'} and was never overwritten`
      : `the archive at ${row.archiveKey ?? '(unknown key)'} does not read back as written and was never VERIFIED`;
  return {
    category: AttentionCategory.ARCHIVE_CONFLICT,
    subject: { type: 'operation', id: row.operationId },
    kind: row.kind,
    state: row.archiveState,
    since: row.since.toISOString(),
    why: `${what}; the source is kept. Compare the object with the source and move it aside if it is wrong, then \`opstate retry ${row.operationId} --replan\`${row.lastError === null ? '' : ` (last error: ${row.lastError.message})`}`,
  };
}

/** A package whose files were declared complete and one of them lost its copy there since. */
export interface AttentionEntryRow {
  readonly rawDataPackageId: string;
  readonly packageName: string;
  /** The declared location, as `site/name`. */
  readonly location: string;
  readonly declaredAt: Date;
  readonly files: number;
  /** The files with no PRESENT copy at the location: how many, and the first by id. */
  readonly missing: number;
  readonly firstMissing: { readonly id: string; readonly name: string };
}

/**
 * The attention item of a declared package that waits: its packaging is not created until every
 * file has a PRESENT copy at the declared location again.
 *
 * @example
 * ```ts
 * classifyWaitingEntry(row).why; // 'its 3 files were declared complete at obs/source, but file scan_1.fits …'
 * ```
 */
export function classifyWaitingEntry(row: AttentionEntryRow): AttentionItem {
  const others = row.missing > 1 ? ` and ${row.missing - 1} more of its ${row.files}` : '';
  return {
    category: AttentionCategory.ENTRY_WAITING,
    subject: { type: 'package', id: row.rawDataPackageId },
    kind: OperationKind.RAW_DATA_PACKAGE,
    state: 'WAITING',
    since: row.declaredAt.toISOString(),
    why: `raw data package ${row.packageName}'s files were declared complete at ${row.location}, but file ${row.firstMissing.name} (${row.firstMissing.id})${others} ${row.missing > 1 ? 'have' : 'has'} no PRESENT copy there any more; register its copy there again: the pipeline creates its packaging once every file has one`,
  };
}

/**
 * Orders items the way an operator reads them: by category (in `ATTENTION_CATEGORIES` order),
 * then oldest first (failures newest first, as their pages are).
 *
 * @example
 * ```ts
 * const list = sortAttention([...operationItems, ...breakerItems]);
 * ```
 */
export function sortAttention(items: readonly AttentionItem[]): AttentionItem[] {
  const rank = new Map(ATTENTION_CATEGORIES.map((c, n) => [c, n]));
  return [...items].sort((a, b) => {
    const byCategory = (rank.get(a.category) ?? 0) - (rank.get(b.category) ?? 0);
    if (byCategory !== 0) return byCategory;
    const order = a.category === AttentionCategory.FAILED ? -1 : 1;
    return order * (a.since.localeCompare(b.since) || a.subject.id.localeCompare(b.subject.id));
  });
}
