import { type Loop, type LoopOptions, startLoop } from '../loops/Loop.ts';
import type { PlannedReset } from '../loops/PlannedReset.ts';
import type { Clock } from '../machines/Clock.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import type { Deadlines } from '../machines/deadlines.ts';
import type { Pipeline } from '../machines/pipeline.ts';
import { DEFAULT_STARVATION_AGE_MS } from '../machines/priority.ts';
import { DEFAULT_DISCOVERY_INTERVAL_MS } from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import { type LogLine, writeLines } from '../observe/LogLine.ts';
import type { ActiveOperation } from '../persistence/ActiveOperation.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import { activePages } from '../persistence/reads/activePages.ts';
import type { Transport, WorkerHeartbeat } from '../transport/Transport.ts';
import { type BreakerRepository, startCircuitBreakerLoop } from './CircuitBreaker.ts';
import type { ControlPlaneTiming } from './ControlPlaneTiming.ts';
import type { LeadershipTerm } from './Leadership.ts';
import { type PipelineFaults, pipelinePass } from './pipelineLoop.ts';
import { planDeadlineResets } from './planDeadlinePass.ts';
import {
  barrierDue,
  type OutboxDispatch,
  planRelay,
  type RelayBarrier,
  relayGraceMs,
  relayPassedTo,
  schedulingLimit,
  settledBarrier,
  sortPublished,
} from './planDispatch.ts';
import {
  planMonitorResets,
  planStrandedResets,
  staleSuspects,
  strandedLookMs,
  unlistedScheduled,
} from './planMonitorPass.ts';
import { planReconcilerResets, spareWaiting } from './planReconcilerPass.ts';
import { drainLegacyQueues, type SiteRoutes, siteRoutes } from './siteRoutes.ts';

export type { ControlPlaneTiming } from './ControlPlaneTiming.ts';

export const DEFAULT_CONTROL_PLANE_TIMING: ControlPlaneTiming = Object.freeze({
  schedulerIntervalMs: 250,
  relayIntervalMs: 250,
  monitorIntervalMs: 10_000,
  reconcilerIntervalMs: 60_000,
  batchSize: 256,
  maxScheduled: 1_000,
  starvationAgeMs: DEFAULT_STARVATION_AGE_MS,
  breakerIntervalMs: 1_000,
  breakerThreshold: 5,
  breakerCooldownMs: 60_000,
  countFoldIntervalMs: 5_000,
  historyIntervalMs: 60_000,
  discoveryIntervalMs: DEFAULT_DISCOVERY_INTERVAL_MS,
});

/** What the control plane reads and writes of the operations (the store, or a test's). */
export type ControlPlaneStore = Pick<
  OperationStore,
  | 'database'
  | 'countScheduled'
  | 'claimDue'
  | 'relayPosition'
  | 'dispatchBarrier'
  | 'fetchScheduled'
  | 'loadDispatches'
  | 'saveRelayCursor'
  | 'loadMany'
  | 'listActiveOlderThan'
  | 'listPastDeadline'
  | 'apply'
  | 'foldCounts'
  | 'maintainHistory'
  | 'routedLocations'
>;

export interface ControlPlaneOptions {
  readonly store: ControlPlaneStore;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timing: ControlPlaneTiming;
  /**
   * Each kind's deadline per attempt, for the deadline path (an operation's own `deadlineMs`
   * wins): the runtime's `timing.deadlines`.
   */
  readonly deadlines: Deadlines;
  /**
   * The leadership term these loops run under: a pass starts only while it is valid, and every
   * write carries its fence. Without one (tests of a single process) writes are not fenced.
   */
  readonly term?: LeadershipTerm;
  /** The circuit breakers' rows (tests); default: the store's database. */
  readonly breakers?: BreakerRepository;
  /** A declared pipeline to run (`definePipeline`): without one, no pipeline pass runs. */
  readonly pipeline?: Pipeline;
  /** Drills only: crash points of the pipeline pass. */
  readonly pipelineFaults?: PipelineFaults;
}

/** The running loops of a leader. `wake()` tells the scheduler that work was submitted. */
export interface ControlPlaneLoops {
  wake(): void;
  stop(): Promise<void>;
}

/** What every loop's pass shares: the options, plus the fence of the term. */
type Shell = ControlPlaneOptions & { readonly leaderLoop: (o: PassOptions) => Loop };
type PassOptions = Omit<LoopOptions, 'clock' | 'logger'>;

/**
 * Publishes dispatches; returns the keys (`dispatchKey`) of those that went out and how many
 * failed. A failed one is the relay's: its SCHEDULE transition stays past the relay's cursor.
 */
async function publish(
  shell: Shell,
  dispatches: readonly OutboxDispatch[],
  from: string,
): Promise<{ sent: string[]; failed: number }> {
  if (dispatches.length === 0) return { sent: [], failed: 0 };
  const results = await shell.transport.publishMany(
    dispatches.map((d) => ({ route: d.route, message: d.payload })),
  );
  const { sent, failed, lines } = sortPublished(dispatches, results, from);
  writeLines(shell.logger, lines);
  return { sent, failed };
}

/**
 * What the scheduler of this term published, by `dispatchKey`, for the relay to pass over. Only
 * a saving: a key lost (a full set cleared, a new term) means one more publish of the same
 * attempt, which the broker deduplicates and the worker fences.
 */
const MAX_PUBLISHED_KEYS = 100_000;

/**
 * Scheduler: due PENDING → SCHEDULED in batches (each dispatch in its transition), published at
 * once. A dispatch to a site queue whose consumer the routes loop has not created (a location
 * registered since its last pass) wakes that loop, so the work's consumer is made now rather than
 * at the next discovery interval.
 */
function schedulerLoop(
  shell: Shell,
  published: Set<string>,
  routes: { readonly sites: SiteRoutes; readonly loop: Loop },
): Loop {
  const { store, timing, logger } = shell;
  return shell.leaderLoop({
    name: 'scheduler',
    intervalMs: timing.schedulerIntervalMs,
    pass: async () => {
      const limit = schedulingLimit({ ...timing, scheduled: await store.countScheduled() });
      if (limit === 0) return false;
      const { claimed, refused, heldBack } = await store.claimDue(limit, shell.term?.fence, {
        starvationAgeMs: timing.starvationAgeMs,
      });
      for (const r of refused) {
        logger.log('ERROR', 'scheduler cannot schedule operation; left as it is', {
          operationId: r.id,
          err: r.error,
        });
      }
      // Publish at once; the relay reading the history is only the safety net for a crash or a
      // broker outage in between.
      const { sent } = await publish(shell, claimed, 'scheduler');
      // Every claimed route is asked (not `some`): each new queue is marked as asked once.
      if (claimed.filter((c) => routes.sites.wakeFor(c.route)).length > 0) routes.loop.wake();
      if (published.size + sent.length > MAX_PUBLISHED_KEYS) published.clear();
      for (const key of sent) published.add(key);
      // Rows a flow limit held back filled part of the batch: their scope is full now, and the
      // next pass skips it before it locks anything, so run it at once for the work behind them.
      return claimed.length === limit || (heldBack > 0 && claimed.length > 0);
    },
  });
}

/** How long the barrier may be refused (a dispatch write open all along) before the relay says so. */
const BARRIER_REFUSED_WARN_MS = 30_000;

/**
 * Says once, as a WARNING, when the relay's barrier has been refused for `BARRIER_REFUSED_WARN_MS`
 * (a transaction writing dispatches open all along: a process stopped inside a claim, say), and
 * once more when it is granted again. The scheduler goes on meanwhile; only the relay waits.
 */
export function barrierRefusals(logger: Logger): { note(refused: boolean, now: number): void } {
  let since: number | undefined;
  let warned = false;
  return {
    note(refused, now) {
      if (!refused) {
        if (warned) logger.log('INFO', 'dispatch relay: its barrier is granted again');
        since = undefined;
        warned = false;
        return;
      }
      since ??= now;
      if (warned || now - since < BARRIER_REFUSED_WARN_MS) return;
      warned = true;
      logger.log(
        'WARNING',
        'dispatch relay: a transaction writing dispatches has held its lock for a while; the relay waits for it to end before it passes the history (the scheduler goes on)',
        { refusedForMs: now - since },
      );
    },
  };
}

/**
 * Dispatch relay: takes a barrier (`dispatchBarrier`) every quarter of its grace while the history
 * grows (`barrierDue`), reads the SCHEDULE transitions past its cursor up to the newest barrier at
 * least its grace old (`settledBarrier`), publishes those the scheduler left (a crash or a broker
 * outage after commit) and moves the cursor past what went out. A pass with neither a barrier due
 * nor one settled reads nothing; an idle one, no transition newer than the cursor, reads one row.
 */
function relayLoop(shell: Shell, published: Set<string>): Loop {
  const { store, timing, clock } = shell;
  const graceMs = relayGraceMs(timing.relayIntervalMs);
  // The reads are of the history alone; what goes out is what the scheduler left.
  const limit = timing.batchSize * 4;
  let barriers: RelayBarrier[] = [];
  const refused = barrierRefusals(shell.logger);
  return shell.leaderLoop({
    name: 'dispatch relay',
    intervalMs: timing.relayIntervalMs,
    pass: async () => {
      const now = clock.now();
      const due = barrierDue(barriers, now, graceMs);
      if (!due && settledBarrier(barriers, now, graceMs).upTo === undefined) return false;
      const { after, newest } = await store.relayPosition();
      if (due && newest > after) {
        const barrier = await store.dispatchBarrier();
        refused.note(barrier === undefined, now);
        if (barrier !== undefined) barriers.push({ at: now, upTo: barrier });
      }
      const { upTo, keep } = settledBarrier(barriers, now, graceMs);
      barriers = keep;
      if (upTo === undefined || upTo <= after) return false;
      const rows = await store.fetchScheduled(after, upTo, limit);
      const plan = planRelay({ rows, upTo, now, graceMs, limit, published });
      for (const key of plan.passed) published.delete(key);
      const sent = (await store.loadDispatches(plan.load)).filter((d) => !d.stale);
      const results =
        sent.length === 0
          ? []
          : await shell.transport.publishMany(
              sent.map((d) => ({ route: d.route, message: d.payload })),
            );
      writeLines(shell.logger, sortPublished(sent, results, 'dispatch relay').lines);
      const passedTo = relayPassedTo(plan, sent, results);
      if (passedTo > after) await store.saveRelayCursor(passedTo, shell.term?.fence);
      return plan.more && passedTo === plan.upTo;
    },
  });
}

/**
 * Applies a reset a pass planned, fenced on the attempt judged dead. A lost race (the worker
 * completed or failed in between, the operation moved on) is routine: nothing to recover. Anything
 * else (an outage, lost leadership) ends the pass and is the loop's to report.
 */
async function applyReset(shell: Shell, r: PlannedReset): Promise<void> {
  try {
    await shell.store.apply(r.id, r.event, { by: r.event.by, fence: shell.term?.fence });
  } catch (err) {
    if (classifyFailure(err) !== 'lost_race') throw err;
    shell.logger.log('DEBUG', `${r.event.by} reset skipped: the operation moved on`, {
      operationId: r.id,
      err,
    });
    return;
  }
  writeLines(shell.logger, [r.line]);
}

/** Heartbeat monitor (primary recovery): what only stale heartbeats hold is reset. */
function monitorLoop(shell: Shell): Loop {
  const { store, transport, clock, timing } = shell;
  const timeoutMs = transport.timing.heartbeatTimeoutMs;
  // Stranded-dispatch marks of this process's passes (a new leader starts without any).
  const seen = new Map<string, number>();
  return shell.leaderLoop({
    name: 'heartbeat monitor',
    intervalMs: timing.monitorIntervalMs,
    pass: async () => {
      const beats = await transport.heartbeats.list();
      const suspects = staleSuspects(beats, clock.now(), timeoutMs);
      if (suspects.length > 0) {
        const operations = [...(await store.loadMany(suspects)).values()];
        const resets = planMonitorResets({ now: clock.now(), timeoutMs, beats, operations });
        for (const r of resets) await applyReset(shell, r);
      }
      await strandedPass(shell, beats, seen);
      return false;
    },
  });
}

/**
 * The monitor's second look: dispatches the broker handed to a worker that died or froze before
 * it could list them in a heartbeat (`planStrandedResets`). The broker is asked only when some
 * SCHEDULED operation has gone unlisted for longer than the heartbeat timeout.
 */
async function strandedPass(
  shell: Shell,
  beats: readonly WorkerHeartbeat[],
  seen: Map<string, number>,
): Promise<void> {
  const { store, transport, clock } = shell;
  const timeoutMs = transport.timing.heartbeatTimeoutMs;
  const now = clock.now();
  const { waiting, graceMs } = await readUnlisted(store, transport.timing, beats, now);
  if (waiting.length === 0) {
    seen.clear();
    return;
  }
  const unsettled = await transport.unsettled();
  const planned = planStrandedResets({ now, timeoutMs, graceMs, beats, waiting, unsettled, seen });
  seen.clear();
  for (const [key, at] of planned.seen) seen.set(key, at);
  for (const r of planned.resets) await applyReset(shell, r);
}

/**
 * Deadline path: IN_PROGRESS past its attempt's deadline, measured from its START in the database
 * on this clock → RESET, whatever its heartbeats say, with one WARNING each. It runs at the
 * heartbeat monitor's interval.
 */
function deadlineLoop(shell: Shell): Loop {
  const { store, clock, timing, deadlines } = shell;
  return shell.leaderLoop({
    name: 'deadline',
    intervalMs: timing.monitorIntervalMs,
    pass: async () => {
      const running = await store.listPastDeadline(
        new Date(clock.now()),
        deadlines,
        timing.batchSize,
      );
      if (running.length === 0) return false;
      const resets = planDeadlineResets({ now: clock.now(), deadlines, running });
      for (const r of resets) await applyReset(shell, r);
      // A full page: more may be past their deadline.
      return running.length === timing.batchSize;
    },
  });
}

/** Folds the counts' rows (`OperationStore.foldCounts`), so counting never grows with time. */
function countFoldLoop(shell: Shell): Loop {
  return shell.leaderLoop({
    name: 'count folding',
    intervalMs: shell.timing.countFoldIntervalMs,
    pass: async () => {
      await shell.store.foldCounts();
      return false;
    },
  });
}

/**
 * The transition history's care (`OperationStore.maintainHistory`): partitions made ahead, those
 * the retention policy lets go dropped, each drop logged; rows that overflowed into the default
 * partition (partitions made too late) are logged once per change of their number.
 */
function historyLoop(shell: Shell): Loop {
  const { store, logger, clock } = shell;
  let spilledBefore = 0;
  let journalSpilledBefore = 0;
  return shell.leaderLoop({
    name: 'history',
    intervalMs: shell.timing.historyIntervalMs,
    pass: async () => {
      const { made, spilled, dropped, journal } = await store.maintainHistory(
        new Date(clock.now()),
      );
      if (made > 0) logger.log('DEBUG', 'history partitions made ahead', { made });
      if (journal.made > 0) {
        logger.log('DEBUG', 'journal spans made ahead', { made: journal.made });
      }
      for (const d of journal.dropped) {
        logger.log('INFO', 'journal span dropped by the retention policy', {
          span: d.suffix,
          fromId: d.lowerId,
          toId: d.upperId,
          rows: d.rows,
          newest: d.newest?.toISOString() ?? null,
        });
      }
      for (const d of dropped) {
        logger.log('INFO', 'history partition dropped by the retention policy', {
          partition: d.name,
          fromId: d.lowerId,
          toId: d.upperId,
          rows: d.rows,
          newest: d.newest?.toISOString() ?? null,
        });
      }
      if (spilled !== spilledBefore && spilled > 0) {
        logger.log('WARNING', 'transitions overflowed into the default partition of the history', {
          rows: spilled,
          hint: 'partitions were not made in time (the leader was down or the history loop failing); they stay there, outside retention',
        });
      }
      spilledBefore = spilled;
      if (journal.spilled !== journalSpilledBefore && journal.spilled > 0) {
        logger.log(
          'WARNING',
          'steps or failures overflowed into the default partitions of the journal',
          {
            rows: journal.spilled,
            hint: 'spans were not made in time, or an operation id was made by a clock far from the database server; they stay there, outside retention',
          },
        );
      }
      journalSpilledBefore = journal.spilled;
      return false;
    },
  });
}

/**
 * The stranded look's read (no writes): every SCHEDULED operation scheduled before the look's
 * cutoff, page by page, that no heartbeat lists at its attempt. Only SCHEDULED ones can be
 * stranded, and every page of them is read: long-running IN_PROGRESS operations, older still,
 * would otherwise fill the page and hide them. Exported for the in-flight bench, which measures it.
 *
 * @example
 * ```ts
 * const { waiting } = await readUnlisted(store, transport.timing, beats, clock.now());
 * ```
 */
export async function readUnlisted(
  store: Pick<ControlPlaneStore, 'listActiveOlderThan'>,
  timing: { readonly heartbeatTimeoutMs: number; readonly heartbeatIntervalMs: number },
  beats: readonly WorkerHeartbeat[],
  now: number,
): Promise<{ waiting: ActiveOperation[]; rows: number; graceMs: number }> {
  // More than one beat: a worker that received a dispatch just before a look lists it by then.
  const graceMs = Math.ceil(1.5 * timing.heartbeatIntervalMs);
  const lookMs = strandedLookMs(timing.heartbeatTimeoutMs, graceMs);
  const waiting: ActiveOperation[] = [];
  let rows = 0;
  for await (const page of activePages(store, new Date(now - lookMs), { status: 'SCHEDULED' })) {
    rows += page.length;
    waiting.push(...unlistedScheduled(beats, page, now - lookMs));
  }
  return { waiting, rows, graceMs };
}

/**
 * The reconciler's read and decision (no writes): every operation in flight since before
 * `before`, page by page, oldest first (with a page's worth of healthy long-running operations in
 * flight, one lost behind them is still found), then the heartbeats once, after the last page:
 * every row is judged by beats written after it was read, and a pass reads each heartbeat once,
 * however many pages the operations in flight take. A SCHEDULED operation it would reset is then
 * looked for in its queue (`Transport.waiting`, asked only when there is one): a dispatch waiting
 * there for a live worker's free slot is left to wait (`spareWaiting`). Exported for the
 * in-flight bench.
 *
 * @example
 * ```ts
 * const { resets } = await readReconcilerResets(store, transport, now, new Date(now - floorMs));
 * ```
 */
export async function readReconcilerResets(
  store: Pick<ControlPlaneStore, 'listActiveOlderThan'>,
  transport: Pick<Transport, 'heartbeats' | 'timing' | 'waiting'>,
  now: number,
  before: Date,
): Promise<{ resets: PlannedReset[]; rows: number; lists: number; spared?: LogLine }> {
  const old: ActiveOperation[] = [];
  for await (const page of activePages(store, before)) old.push(...page);
  if (old.length === 0) return { resets: [], rows: 0, lists: 0 };
  const beats = await transport.heartbeats.list();
  const timing = transport.timing;
  const planned = planReconcilerResets({ now, timing, beats, old });
  const wanted = new Map(
    planned.filter((r) => r.status === 'SCHEDULED').map((r) => [r.id, r.attempt]),
  );
  if (wanted.size === 0) return { resets: planned, rows: old.length, lists: 1 };
  const waiting = await transport.waiting(wanted);
  const heartbeatTimeoutMs = timing.heartbeatTimeoutMs;
  const kept = spareWaiting({ resets: planned, waiting, beats, now, heartbeatTimeoutMs });
  return { resets: kept.resets, rows: old.length, lists: 1, spared: kept.line };
}

/** Reconciler (backstop): active past the floor and held by no live worker → reset. */
function reconcilerLoop(shell: Shell): Loop {
  const { store, transport, clock, timing } = shell;
  return shell.leaderLoop({
    name: 'reconciler',
    intervalMs: timing.reconcilerIntervalMs,
    pass: async () => {
      const now = clock.now();
      const before = new Date(now - transport.timing.reconcilerFloorMs);
      const { resets, spared } = await readReconcilerResets(store, transport, now, before);
      if (spared !== undefined) writeLines(shell.logger, [spared]);
      for (const r of resets) await applyReset(shell, r);
      return false;
    },
  });
}

/**
 * Starts the control-plane loops (run on the leader only). Each pass reads, asks a pure decision
 * what to do (`schedulingLimit`, `planRelay`, `planMonitorResets`, `planDeadlineResets`,
 * `planReconcilerResets`, `planBreakerPass`) and writes what it says:
 * - scheduler: due PENDING → SCHEDULED in batches, each dispatch recorded by its SCHEDULE
 *   transition in the same statement, then published at once;
 * - dispatch relay: reads the SCHEDULE transitions past its cursor and publishes those left
 *   behind (a crash or a broker outage between commit and publish), then moves the cursor; dedup
 *   makes a re-publish of the same attempt harmless;
 * - heartbeat monitor (primary recovery): SCHEDULED or IN_PROGRESS held (per the worker
 *   heartbeats) only by workers whose heartbeat went stale → RESET: a dispatch that sits with a
 *   dead or stalled worker, pulled or running, comes back within about the heartbeat timeout;
 *   so does a dispatch the broker handed to a worker that died or froze before it read it (no
 *   heartbeat lists it: SCHEDULED past the timeout, listed by none, and unsettled at the broker);
 * - deadline: IN_PROGRESS for longer than its attempt's deadline since its START → RESET, with one
 *   WARNING per reset, whatever the heartbeats say: a handler that hangs inside a live worker
 *   (whose heartbeat goes on listing it) is brought home too;
 * - reconciler (backstop): SCHEDULED/IN_PROGRESS held by no live worker and older than the floor →
 *   RESET, with one WARNING line per reset. It covers what the monitor cannot see: a dispatch lost
 *   on its way to a worker, and a heartbeat store that lost its keys;
 * - circuit breaker: FAIL/COMPLETE outcomes per (kind, target location) open, half-open and close
 *   the pair's breaker, which the scheduler obeys (see `createCircuitBreaker`);
 * - count folding: every `countFoldIntervalMs`, the rows the counts per kind × status are
 *   summed from are folded into one per pair;
 * - history: every `historyIntervalMs`, partitions of the transition history are made ahead of
 *   its ids, and those the retention policy lets go are dropped (`maintainHistory`);
 * - pipeline (when one is given): at the scheduler's interval, the completions past the pipeline's
 *   cursor create the operations of the stages that follow (`pipelinePass`, `planPipelinePass`);
 * - site routes: at start, on each wake and every `discoveryIntervalMs`, the consumer of each registered
 *   location's site queues is created (`siteRoutes`), and, all along, dispatches queued under
 *   the legacy names are moved onto their operations' site queues (`drainLegacyQueues`).
 *
 * @example
 * ```ts
 * const loops = startControlPlaneLoops({ store, transport, clock, logger, timing,
 *   deadlines: timing.deadlines });
 * loops.wake(); await loops.stop();
 * ```
 */
export function startControlPlaneLoops(options: ControlPlaneOptions): ControlPlaneLoops {
  const { clock, logger, timing, term } = options;
  const shell: Shell = {
    ...options,
    // A loop whose passes start only while the term is valid.
    leaderLoop: (o) =>
      startLoop({
        ...o,
        clock,
        logger,
        pass: () => (term === undefined || term.valid() ? o.pass() : Promise.resolve(false)),
      }),
  };
  const published = new Set<string>();
  // Woken with the scheduler (work submitted in this process) and by a dispatch the scheduler sent
  // to a site queue it has not created: work at a location registered since gets its consumer.
  const sites = siteRoutes(options);
  const routes = shell.leaderLoop({
    name: 'site routes',
    intervalMs: timing.discoveryIntervalMs,
    pass: sites.pass,
  });
  const scheduler = schedulerLoop(shell, published, { sites, loop: routes });
  const breaker = startCircuitBreakerLoop({
    database: options.store.database,
    ...(options.breakers === undefined ? {} : { repository: options.breakers }),
    clock,
    logger,
    policy: { threshold: timing.breakerThreshold, cooldownMs: timing.breakerCooldownMs },
    batchSize: timing.batchSize * 4,
    intervalMs: timing.breakerIntervalMs,
    onRelease: () => scheduler.wake(),
    ...(term === undefined ? {} : { term }),
  });
  const loops: Loop[] = [
    routes,
    scheduler,
    relayLoop(shell, published),
    monitorLoop(shell),
    deadlineLoop(shell),
    reconcilerLoop(shell),
    breaker,
    countFoldLoop(shell),
    historyLoop(shell),
  ];
  if (options.pipeline !== undefined) {
    loops.push(
      shell.leaderLoop({
        name: `pipeline '${options.pipeline.name}'`,
        intervalMs: timing.schedulerIntervalMs,
        pass: pipelinePass({
          database: options.store.database,
          pipeline: options.pipeline,
          clock,
          logger,
          batchSize: timing.batchSize,
          fence: () => term?.fence,
          onCreated: () => scheduler.wake(),
          faults: options.pipelineFaults,
        }),
      }),
    );
  }
  const drains = drainLegacyQueues(options);
  return {
    wake: () => {
      scheduler.wake();
      routes.wake();
    },
    stop: async () => {
      await Promise.all([...loops, ...drains].map((l) => l.stop()));
    },
  };
}
