import { randomUUID } from 'node:crypto';
import { untilReachable } from '../loops/untilReachable.ts';
import type { Clock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Logger } from '../observe/Logger.ts';
import { heldThatFits, MAX_HEARTBEAT_BYTES } from '../transport/HeartbeatKey.ts';
import type { HeldOperation, Transport, WorkerReads } from '../transport/Transport.ts';

/** A delivery the heartbeat keeps alive at the broker (`working()`) while it is held. */
interface Touchable {
  working(): void;
}

/**
 * The worker's one heartbeat: what it holds and what it reads, written to the heartbeat store as
 * one key.
 */
export interface WorkerHeartbeatLoop {
  /** This process's nonce, random per start, written in every beat. */
  readonly instance: string;
  /**
   * Resolves once the worker id is claimed for this instance (`Heartbeats.claim`, waiting out a
   * broker outage) and the first beat has landed; rejects with `CONFIG` naming the id when a live
   * process of another instance holds it. No beat is written before, and none after a refusal.
   */
  readonly claimed: Promise<void>;
  /**
   * Says from now on that the worker reads these queues (a queue discovered while it runs), and
   * beats at once so that readers see it. Rejects as a beat does.
   */
  reading(reads: WorkerReads): Promise<void>;
  /** Holds an operation (pulled, about to start, or running); the next beat lists it. */
  hold(op: HeldOperation, delivery: Touchable): void;
  /**
   * Holds a delivery just received, unless its operation is held already (running here, or another
   * delivery of it on its way); returns whether it did. The next beat lists it, so a dispatch a
   * live worker has read is never mistaken for one stranded with a dead worker.
   */
  receive(op: HeldOperation, delivery: Touchable): boolean;
  /**
   * Lets that attempt's hold go; the next beat no longer lists it. A later attempt of the operation
   * held since (its last attempt's handler hung past its deadline, and the next one started here)
   * stays listed.
   */
  release(operationId: string, attempt: number): void;
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
   * fails (the broker unreachable), and, for `operationId`, when that beat could not list it (more
   * held than fits in `MAX_HEARTBEAT_BYTES`): the caller must not start what it could not cover.
   */
  cover(operationId?: string): Promise<void>;
  /** Stops beating; `remove` also deletes the key (a clean stop), else it ages out (a crash). */
  stop(options: { remove: boolean }): Promise<void>;
}

export interface WorkerHeartbeatOptions {
  readonly workerId: string;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * The queues the worker consumes and its kinds, written in every beat (the claim's first one
   * too), so it shows as serving its queues while it holds nothing. Absent: the beats do not say,
   * and the worker reads as one of an older version.
   */
  readonly reads?: WorkerReads;
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
 * What one beat lists: everything held, or, when that would exceed `MAX_HEARTBEAT_BYTES`, those
 * held longest (the first in `all`) that fit, with one line each time that changes.
 */
function listWithinCap(
  state: { cut: boolean; readonly logger: Logger; readonly workerId: string },
  all: HeldOperation[],
  instance: string,
  reads: WorkerReads | undefined,
): HeldOperation[] {
  const fits = heldThatFits(all, instance, reads);
  if (fits < all.length !== state.cut) {
    state.cut = fits < all.length;
    if (state.cut) {
      state.logger.log(
        'WARNING',
        `worker holds more operations than one heartbeat lists (${MAX_HEARTBEAT_BYTES} bytes); the newest are left out and not started; lower its concurrency`,
        { workerId: state.workerId, held: all.length, listed: fits },
      );
    } else {
      state.logger.log('INFO', 'worker heartbeat lists everything it holds again', {
        workerId: state.workerId,
      });
    }
  }
  return fits < all.length ? all.slice(0, fits) : all;
}

/** Why an operation the last beat could not list is not covered (and must not be started). */
function notCovered(workerId: string, operationId: string, held: number, listed: number) {
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `worker ${workerId} holds more operations than one heartbeat can list (${MAX_HEARTBEAT_BYTES} bytes), so ${operationId} is not covered and is handed back; lower the worker's concurrency`,
    { details: { workerId, operationId, held, listed } },
  );
}

/**
 * One periodic beat: write, then tell each held delivery it is still worked on. A failure is
 * logged once until a beat lands again.
 */
async function periodicBeat(
  state: { failing: boolean; readonly logger: Logger; readonly workerId: string },
  beat: () => Promise<void>,
  deliveries: () => Iterable<Touchable>,
  held: () => number,
): Promise<void> {
  try {
    await beat();
    for (const d of deliveries()) d.working();
    if (state.failing) {
      state.failing = false;
      state.logger.log('INFO', 'worker heartbeat written again', { workerId: state.workerId });
    }
  } catch (err) {
    if (!state.failing) {
      state.failing = true;
      state.logger.log('WARNING', 'worker heartbeat failed; retrying at every interval', {
        workerId: state.workerId,
        held: held(),
        err,
      });
    }
  }
}

/**
 * One write in flight at a time and at most one queued behind it: concurrent callers share them,
 * and a caller's write starts after its call (the queued one covers what was added since).
 */
function coalesced(write: () => Promise<void>): {
  run(): Promise<void>;
  idle(): Promise<void>;
} {
  let inFlight: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  const run = (): Promise<void> => {
    if (inFlight === undefined) {
      inFlight = write().finally(() => {
        inFlight = undefined;
      });
      return inFlight;
    }
    queued ??= inFlight
      .catch(() => {})
      .then(() => {
        queued = undefined;
        return run();
      });
    return queued;
  };
  return { run, idle: async () => void (await inFlight?.catch(() => undefined)) };
}

/** Removes the worker's heartbeat key; a failure is left to the key's age limit. */
async function removeKey(options: WorkerHeartbeatOptions): Promise<void> {
  const { transport, logger, workerId } = options;
  await transport.heartbeats.remove(workerId).catch((err: unknown) => {
    logger.log('DEBUG', 'worker heartbeat removal failed; the key ages out', { workerId, err });
  });
}

/** Claims the worker id for this instance, waiting out a broker outage until stopped. */
function claimId(
  options: WorkerHeartbeatOptions,
  instance: string,
  stopped: AbortSignal,
): Promise<void> {
  const { workerId, transport, clock, logger, reads } = options;
  return untilReachable(
    'the heartbeat store',
    () => transport.heartbeats.claim(workerId, instance, reads),
    {
      logger,
      clock,
      reachedThen: 'worker id claimed',
      giveUp: () => (stopped.aborted ? 'the worker is stopping' : undefined),
      signal: stopped,
    },
  );
}

/**
 * One heartbeat per worker process, at the transport's heartbeat interval: it lists every
 * operation the worker holds and the queues it reads, and calls `working()` on each held delivery. Because a worker covers
 * an operation (`cover()`) before it starts it, the control plane finds any dispatch that sits with
 * a worker that stopped beating — pulled or running — and its first heartbeat covers every
 * operation it starts. One key write per interval per worker, however many operations it holds.
 *
 * It first claims the worker id for a fresh instance nonce (`claimed`): a second live process
 * with the same id is refused. A beat never exceeds `MAX_HEARTBEAT_BYTES`: when more is held than
 * fits, it lists the operations held longest (those running first) and leaves out the newest, with
 * one WARNING until it fits again; covering one left out rejects, so it is not started.
 *
 * @example
 * ```ts
 * const hb = startWorkerHeartbeat({ workerId, transport, clock, logger,
 *   reads: { queues: ['source_data_transfer'], kinds: [OperationKind.TRANSFER] } });
 * hb.hold({ kind, operationId, attempt }, delivery); await hb.cover(); // then START
 * ```
 */
export function startWorkerHeartbeat(options: WorkerHeartbeatOptions): WorkerHeartbeatLoop {
  const { workerId, transport, clock, logger, afterBeat, onOverdue } = options;
  let reads = options.reads;
  const instance = randomUUID();
  let landedAt = clock.now();
  // What the last beat that landed listed, and whether the list had to be cut to the cap.
  let listed = new Set<string>();
  const capState = { cut: false, logger, workerId };
  const age = () => clock.now() - landedAt;
  const entries = new Map<string, { op: HeldOperation; delivery: Touchable }>();
  const beatState = { failing: false, logger, workerId };
  const afterBeatState = { failing: false, logger, workerId };
  let checking: Promise<void> | undefined;
  const stop = new AbortController();

  const held = () => [...entries.values()].map((e) => e.op);
  const writes = coalesced(async () => {
    await claimed;
    const list = listWithinCap(capState, held(), instance, reads);
    const issuedAt = clock.now();
    await transport.heartbeats.beat(workerId, list, instance, reads);
    landedAt = Math.max(landedAt, issuedAt);
    listed = new Set(list.map((h) => h.operationId));
  });
  const beat = writes.run;

  const claimed = claimId(options, instance, stop.signal).then(() => {
    landedAt = Math.max(landedAt, clock.now());
  });
  // Whether the claim held; its rejection is the caller's to see (through `claimed`).
  const claim = claimed.then(
    () => true,
    () => false,
  );

  const loop = (async () => {
    if (!(await claim)) return;
    while (!stop.signal.aborted) {
      if (entries.size > 0 && age() > transport.timing.heartbeatTimeoutMs) onOverdue?.(age());
      await periodicBeat(
        beatState,
        beat,
        () => [...entries.values()].map((e) => e.delivery),
        () => entries.size,
      );
      // The check reads the database; it runs beside the loop, never in its way: a database that
      // hangs (restarting) must not stop the beats, or the worker would find its own heartbeat
      // overdue and let go of everything it runs. One check at a time; a beat while one is still
      // running starts none.
      if (afterBeat !== undefined && checking === undefined) {
        const now = held();
        checking = checkAfterBeat(afterBeatState, () => afterBeat(now)).finally(() => {
          checking = undefined;
        });
      }
      await clock.sleep(transport.timing.heartbeatIntervalMs, stop.signal);
    }
  })();

  const cover = async (operationId?: string): Promise<void> => {
    await beat();
    if (operationId !== undefined && entries.has(operationId) && !listed.has(operationId)) {
      throw notCovered(workerId, operationId, entries.size, listed.size);
    }
  };

  return {
    instance,
    claimed,
    async reading(next) {
      reads = next;
      await beat();
    },
    hold(op, delivery) {
      entries.set(op.operationId, { op, delivery });
    },
    receive(op, delivery) {
      if (entries.has(op.operationId)) return false;
      entries.set(op.operationId, { op, delivery });
      return true;
    },
    release(operationId, attempt) {
      if (entries.get(operationId)?.op.attempt !== attempt) return;
      entries.delete(operationId);
    },
    held,
    age,
    cover,
    async stop({ remove }) {
      stop.abort();
      await loop;
      await writes.idle();
      await checking;
      // A refused claim never wrote the key: it is the other process's, never to be removed.
      if (remove && (await claim)) await removeKey(options);
    },
  };
}
