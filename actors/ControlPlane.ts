import { classifyFailure } from '../machines/classifyFailure.ts';
import type { Route } from '../machines/routing.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import { holdsAlive } from '../transport/HeartbeatKey.ts';
import type { DispatchMessage, Transport } from '../transport/Transport.ts';
import { startCircuitBreakerLoop } from './CircuitBreaker.ts';
import type { Clock } from './Clock.ts';
import { findAbandoned } from './findAbandoned.ts';
import type { LeadershipTerm } from './Leadership.ts';
import type { Logger } from './Logger.ts';
import { type Loop, type LoopOptions, startLoop } from './Loop.ts';

/** How often each control-plane loop runs when idle, and how much it takes per pass. */
export interface ControlPlaneTiming {
  readonly schedulerIntervalMs: number;
  readonly relayIntervalMs: number;
  readonly monitorIntervalMs: number;
  readonly reconcilerIntervalMs: number;
  readonly batchSize: number;
  /**
   * Most operations SCHEDULED (handed to the broker, not yet started) at once. The rest wait as
   * PENDING: a backlog lives in the database, not in the queue, so a dispatch is picked up soon
   * after it is made and the reconciler floor never mistakes a queued dispatch for a lost one.
   */
  readonly maxScheduled: number;
  /** Circuit breakers per (kind, target location): pass interval, failures to open, cooldown. */
  readonly breakerIntervalMs: number;
  readonly breakerThreshold: number;
  readonly breakerCooldownMs: number;
}

export const DEFAULT_CONTROL_PLANE_TIMING: ControlPlaneTiming = Object.freeze({
  schedulerIntervalMs: 250,
  relayIntervalMs: 250,
  monitorIntervalMs: 10_000,
  reconcilerIntervalMs: 60_000,
  batchSize: 256,
  maxScheduled: 1_000,
  breakerIntervalMs: 1_000,
  breakerThreshold: 5,
  breakerCooldownMs: 60_000,
});

export interface ControlPlaneOptions {
  readonly store: OperationStore;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timing: ControlPlaneTiming;
  /**
   * The leadership term these loops run under: a pass starts only while it is valid, and every
   * write carries its fence. Without one (tests of a single process) writes are not fenced.
   */
  readonly term?: LeadershipTerm;
}

/** The running loops of a leader. `wake()` tells the scheduler that work was submitted. */
export interface ControlPlaneLoops {
  wake(): void;
  stop(): Promise<void>;
}

const iso = (ms: number) => new Date(ms).toISOString();

function ageSeconds(clock: Clock, since: Date | null): number | null {
  return since === null ? null : Math.round((clock.now() - since.getTime()) / 1000);
}

/**
 * Starts the control-plane loops (run on the leader only):
 * - scheduler: due PENDING → SCHEDULED in batches, each dispatch written to the outbox in the
 *   same statement, then published at once;
 * - outbox relay: publishes outbox rows left behind (a crash or a broker outage between commit
 *   and publish) in batches and clears them; dedup makes a re-publish of the same attempt
 *   harmless;
 * - heartbeat monitor (primary recovery): SCHEDULED or IN_PROGRESS held (per the worker
 *   heartbeats) only by workers whose heartbeat went stale → RESET: a dispatch that sits with a
 *   dead or stalled worker, pulled or running, comes back within about the heartbeat timeout;
 * - reconciler (backstop): SCHEDULED/IN_PROGRESS held by no live worker and older than the floor →
 *   RESET, with one WARNING line per reset. It covers what the monitor cannot see: a dispatch lost
 *   on its way to a worker, and a heartbeat store that lost its keys;
 * - circuit breaker: FAIL/COMPLETE outcomes per (kind, target location) open, half-open and close
 *   the pair's breaker, which the scheduler obeys (see `createCircuitBreaker`).
 *
 * @example
 * ```ts
 * const loops = startControlPlaneLoops({ store, transport, clock, logger, timing });
 * loops.wake(); await loops.stop();
 * ```
 */
export function startControlPlaneLoops(options: ControlPlaneOptions): ControlPlaneLoops {
  const { store, transport, clock, logger, timing, term } = options;
  const t = transport.timing;
  const fence = term?.fence;
  /** A loop whose passes start only while the term is valid. */
  const leaderLoop = (o: Omit<LoopOptions, 'clock' | 'logger'>): Loop =>
    startLoop({
      ...o,
      clock,
      logger,
      pass: () => (term === undefined || term.valid() ? o.pass() : Promise.resolve(false)),
    });

  /**
   * Publishes dispatches and clears their outbox rows; a row whose publish failed stays for the
   * relay's next pass. Returns how many failed.
   */
  const publishAndClear = async (
    dispatches: readonly { outboxId: number | null; route: Route; payload: DispatchMessage }[],
    from: string,
  ): Promise<number> => {
    if (dispatches.length === 0) return 0;
    const results = await transport.publishMany(
      dispatches.map((d) => ({ route: d.route, message: d.payload })),
    );
    const sent = dispatches
      .filter((d, i) => results[i]?.ok === true && d.outboxId !== null)
      .map((d) => d.outboxId as number);
    if (sent.length > 0) await store.deleteOutbox(sent, fence);
    const failures = results.filter((r) => !r.ok);
    const first = failures[0];
    if (first !== undefined && !first.ok) {
      logger.log('WARNING', `${from} could not publish some dispatches; the relay retries them`, {
        failed: failures.length,
        error: first.error.message,
      });
    }
    return failures.length;
  };

  const relay = leaderLoop({
    name: 'outbox relay',
    intervalMs: timing.relayIntervalMs,
    pass: async () => {
      // Rows younger than the grace are being published by the scheduler right now; taking them
      // too would only publish twice (harmless, deduplicated, but two round trips for nothing).
      const grace = Math.max(1_000, 4 * timing.relayIntervalMs);
      const now = clock.now();
      const rows = (await store.fetchOutbox(timing.batchSize)).filter(
        (r) => now - r.createdAt.getTime() >= grace,
      );
      if (rows.length === 0) return false;
      // A stale row (the operation moved on) would be fenced by the worker anyway: just drop it.
      const stale = rows.filter((r) => r.stale).map((r) => r.id);
      if (stale.length > 0) await store.deleteOutbox(stale, fence);
      const failed = await publishAndClear(
        rows.filter((r) => !r.stale).map((r) => ({ ...r, outboxId: r.id })),
        'outbox relay',
      );
      return rows.length === timing.batchSize && failed === 0;
    },
  });

  const scheduler = leaderLoop({
    name: 'scheduler',
    intervalMs: timing.schedulerIntervalMs,
    pass: async () => {
      const room = timing.maxScheduled - (await store.countScheduled());
      if (room <= 0) return false;
      const limit = Math.min(timing.batchSize, room);
      const { claimed, refused } = await store.claimDue(limit, fence);
      for (const r of refused) {
        logger.log('ERROR', 'scheduler cannot schedule operation; left as it is', {
          operationId: r.id,
          error: r.error.message,
        });
      }
      // Publish at once; the outbox rows are only the safety net for a crash in between.
      await publishAndClear(claimed, 'scheduler');
      return claimed.length === limit;
    },
  });

  const reset = async (
    op: { id: string; attempt: number },
    by: 'heartbeat_monitor' | 'reconciler',
    reason: string,
  ) => {
    try {
      // Fenced on the attempt that was judged dead: if it moved on meanwhile, the machine refuses.
      await store.apply(
        op.id,
        { type: 'RESET', by, reason, attempt: op.attempt, at: iso(clock.now()) },
        { by, fence },
      );
      return true;
    } catch (err) {
      // Lost a race with the worker (it completed or failed in between): nothing to recover.
      // Anything else (an outage, lost leadership) ends the pass and is the loop's to report.
      if (classifyFailure(err) !== 'lost_race') throw err;
      logger.log('DEBUG', `${by} reset skipped: the operation moved on`, {
        operationId: op.id,
        error: err instanceof Error ? err.message : String(err),
      });
      return false;
    }
  };

  const monitor = leaderLoop({
    name: 'heartbeat monitor',
    intervalMs: timing.monitorIntervalMs,
    pass: async () => {
      const beats = await transport.heartbeats.list();
      const now = clock.now();
      // Only what stale heartbeats list can be abandoned: read just those operations.
      const suspects = new Set<string>();
      for (const b of beats) {
        if (now - b.at < t.heartbeatTimeoutMs) continue;
        for (const h of b.held) suspects.add(h.operationId);
      }
      if (suspects.size === 0) return false;
      const operations = [...(await store.loadMany([...suspects])).values()];
      const abandoned = findAbandoned({ now, timeoutMs: t.heartbeatTimeoutMs, beats, operations });
      for (const op of abandoned) {
        if (await reset(op, 'heartbeat_monitor', `stale heartbeat: ${op.reason}`)) {
          logger.log('INFO', 'heartbeat monitor reset operation', {
            operationId: op.id,
            kind: op.kind,
            status: op.status,
            attempt: op.attempt,
            workerIds: op.workerIds,
            reason: op.reason,
          });
        }
      }
      return false;
    },
  });

  const reconciler = leaderLoop({
    name: 'reconciler',
    intervalMs: timing.reconcilerIntervalMs,
    pass: async () => {
      const now = clock.now();
      const old = await store.listActiveOlderThan(new Date(now - t.reconcilerFloorMs));
      if (old.length === 0) return false;
      const beats = await transport.heartbeats.list();
      for (const op of old) {
        if (holdsAlive(beats, now, t.heartbeatTimeoutMs, op.kind, op.id, op.attempt)) continue;
        const why = `${op.status} for ${ageSeconds(clock, op.since)} s (floor ${t.reconcilerFloorMs / 1000} s) with no live worker holding it`;
        if (await reset(op, 'reconciler', why)) {
          logger.log('WARNING', 'reconciler reset operation', {
            operationId: op.id,
            kind: op.kind,
            status: op.status,
            attempt: op.attempt,
            workerId: op.workerId,
            reason: why,
          });
        }
      }
      return false;
    },
  });

  const breaker = startCircuitBreakerLoop({
    database: store.database,
    clock,
    logger,
    policy: { threshold: timing.breakerThreshold, cooldownMs: timing.breakerCooldownMs },
    batchSize: timing.batchSize * 4,
    intervalMs: timing.breakerIntervalMs,
    onRelease: () => scheduler.wake(),
    ...(term === undefined ? {} : { term }),
  });

  const loops: Loop[] = [scheduler, relay, monitor, reconciler, breaker];
  return {
    wake: () => scheduler.wake(),
    stop: async () => {
      await Promise.all(loops.map((l) => l.stop()));
    },
  };
}
