import type { Clock } from '../machines/Clock.ts';
import type { HeldOperation, Transport } from '../transport/Transport.ts';
import type { Logger } from './Logger.ts';

/** A delivery the heartbeat keeps alive at the broker (`working()`) while it is held. */
interface Touchable {
  working(): void;
}

/** The worker's one heartbeat: what it holds, written to the heartbeat store as one key. */
export interface WorkerHeartbeatLoop {
  /** Holds an operation (pulled, about to start, or running); the next beat lists it. */
  hold(op: HeldOperation, delivery: Touchable): void;
  /**
   * Holds a delivery just received, unless its operation is held already (running here, or another
   * delivery of it on its way); returns whether it did. The next beat lists it, so a dispatch a
   * live worker has read is never mistaken for one stranded with a dead worker.
   */
  receive(op: HeldOperation, delivery: Touchable): boolean;
  /** Lets it go; the next beat no longer lists it. */
  release(operationId: string): void;
  /** What is held now. */
  held(): HeldOperation[];
  /**
   * How long ago (by the runtime's clock) the last beat that landed was issued. Past the heartbeat
   * timeout the control plane may have presumed this worker dead and given its operations to
   * another: a process that was frozen (SIGSTOP) or starved wakes to find this age too high.
   */
  age(): number;
  /**
   * Resolves once a beat written after this call has landed, so it lists everything held now.
   * Concurrent callers share one write (one in flight, the next queued). Rejects when the write
   * fails (the broker unreachable): the caller must not start what it could not cover.
   */
  cover(): Promise<void>;
  /** Stops beating; `remove` also deletes the key (a clean stop), else it ages out (a crash). */
  stop(options: { remove: boolean }): Promise<void>;
}

export interface WorkerHeartbeatOptions {
  readonly workerId: string;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * After a periodic beat, with what was held: the worker checks for operations moved on. It runs
   * beside the beats (one at a time), so a slow or hanging check never delays the next beat.
   */
  readonly afterBeat?: (held: readonly HeldOperation[]) => Promise<void>;
  /**
   * Before a periodic beat, when the last beat that landed is older than the heartbeat timeout:
   * the worker fences itself (aborts what it runs) before it could be seen alive again.
   */
  readonly onOverdue?: (ageMs: number) => void;
}

/**
 * What runs after a beat (the worker's moved-on check reads the database): its failure is not the
 * heartbeat failing (the beat landed) and is logged as what it is, once until it works again.
 */
async function checkAfterBeat(
  state: { failing: boolean; readonly logger: Logger; readonly workerId: string },
  check: () => Promise<void>,
): Promise<void> {
  try {
    await check();
    if (state.failing) {
      state.failing = false;
      state.logger.log('INFO', 'worker checks after its heartbeat again', {
        workerId: state.workerId,
      });
    }
  } catch (err) {
    if (!state.failing) {
      state.failing = true;
      state.logger.log(
        'WARNING',
        'worker check after its heartbeat failed; retrying after each beat',
        {
          workerId: state.workerId,
          err,
        },
      );
    }
  }
}

/**
 * One heartbeat per worker process, at the transport's heartbeat interval: it lists every
 * operation the worker holds and calls `working()` on each held delivery. Because a worker covers
 * an operation (`cover()`) before it starts it, the control plane finds any dispatch that sits with
 * a worker that stopped beating — pulled or running — and its first heartbeat covers every
 * operation it starts. One key write per interval per worker, however many operations it holds.
 *
 * @example
 * ```ts
 * const hb = startWorkerHeartbeat({ workerId, transport, clock, logger });
 * hb.hold({ kind, operationId, attempt }, delivery); await hb.cover(); // then START
 * ```
 */
export function startWorkerHeartbeat(options: WorkerHeartbeatOptions): WorkerHeartbeatLoop {
  const { workerId, transport, clock, logger, afterBeat, onOverdue } = options;
  let landedAt = clock.now();
  const age = () => clock.now() - landedAt;
  const entries = new Map<string, { op: HeldOperation; delivery: Touchable }>();
  let inFlight: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  let failing = false;
  const afterBeatState = { failing: false, logger, workerId };
  let checking: Promise<void> | undefined;
  const stop = new AbortController();

  const write = async () => {
    const held = [...entries.values()].map((e) => e.op);
    const issuedAt = clock.now();
    await transport.heartbeats.beat(workerId, held);
    landedAt = Math.max(landedAt, issuedAt);
  };
  const beat = (): Promise<void> => {
    if (inFlight === undefined) {
      inFlight = write().finally(() => {
        inFlight = undefined;
      });
      return inFlight;
    }
    // A write is in flight with an older list: the next one covers what was added since.
    queued ??= inFlight
      .catch(() => {})
      .then(() => {
        queued = undefined;
        return beat();
      });
    return queued;
  };

  const loop = (async () => {
    while (!stop.signal.aborted) {
      if (entries.size > 0 && age() > transport.timing.heartbeatTimeoutMs) onOverdue?.(age());
      try {
        await beat();
        for (const e of entries.values()) e.delivery.working();
        if (failing) {
          failing = false;
          logger.log('INFO', 'worker heartbeat written again', { workerId });
        }
      } catch (err) {
        if (!failing) {
          failing = true;
          logger.log('WARNING', 'worker heartbeat failed; retrying at every interval', {
            workerId,
            held: entries.size,
            err,
          });
        }
      }
      // The check reads the database; it runs beside the loop, never in its way: a database that
      // hangs (restarting) must not stop the beats, or the worker would find its own heartbeat
      // overdue and let go of everything it runs. One check at a time; a beat while one is still
      // running starts none.
      if (afterBeat !== undefined && checking === undefined) {
        const held = [...entries.values()].map((e) => e.op);
        checking = checkAfterBeat(afterBeatState, () => afterBeat(held)).finally(() => {
          checking = undefined;
        });
      }
      await clock.sleep(transport.timing.heartbeatIntervalMs, stop.signal);
    }
  })();

  return {
    hold(op, delivery) {
      entries.set(op.operationId, { op, delivery });
    },
    receive(op, delivery) {
      if (entries.has(op.operationId)) return false;
      entries.set(op.operationId, { op, delivery });
      return true;
    },
    release(operationId) {
      entries.delete(operationId);
    },
    held: () => [...entries.values()].map((e) => e.op),
    age,
    cover: beat,
    async stop({ remove }) {
      stop.abort();
      await loop;
      await inFlight?.catch(() => undefined);
      await checking;
      if (remove) {
        await transport.heartbeats.remove(workerId).catch((err: unknown) =>
          logger.log('DEBUG', 'worker heartbeat removal failed; the key ages out', {
            workerId,
            err,
          }),
        );
      }
    },
  };
}
