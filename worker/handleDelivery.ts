import { randomUUID } from 'node:crypto';
import type { ResetEvent } from '../loops/PlannedReset.ts';
import { untilReachable } from '../loops/untilReachable.ts';
import type { Clock, TimerHandle } from '../machines/Clock.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import {
  type Deadlines,
  deadlineOf,
  describeDeadline,
  formatRunTime,
} from '../machines/deadlines.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Logger } from '../observe/Logger.ts';
import { writeLines } from '../observe/LogLine.ts';
import { inputRelations } from '../persistence/inputRelations.ts';
import { inspectOperation } from '../persistence/inspectOperation.ts';
import { isoText } from '../persistence/isoText.ts';
import type { JournalRepository } from '../persistence/JournalRepository.ts';
import type { OperationRecord } from '../persistence/OperationRecord.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { requiredOutputsOf } from '../persistence/requiredOutputsOf.ts';
import type { Delivery, Transport } from '../transport/Transport.ts';
import { afterRun, type HandlerOutcome, movedOn, onRefusal } from './decideRun.ts';
import type { HandlerContext, OperationHandler, OperationView } from './OperationHandler.ts';
import { type Triage, triageDelivery } from './triageDelivery.ts';
import type { WorkerBatches } from './WorkerBatches.ts';
import type { WorkerFaults } from './WorkerFaults.ts';
import type { WorkerHeartbeatLoop } from './WorkerHeartbeat.ts';
import type { Lease, WorkerRegistry } from './workerRegistry.ts';

/** What the delivery path of one worker works with: its dependencies and its state. */
export interface WorkerCore {
  readonly id: string;
  readonly store: OperationStore;
  readonly journal: JournalRepository;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Each kind's deadline per attempt; an operation's own `deadlineMs` wins. */
  readonly deadlines: Deadlines;
  readonly handlerFor: (kind: OperationKind) => OperationHandler | undefined;
  readonly faults: WorkerFaults | undefined;
  readonly registry: WorkerRegistry;
  readonly heartbeat: WorkerHeartbeatLoop;
  readonly batches: WorkerBatches;
  /** Set by stop() and crash(). */
  readonly state: { stopping: boolean; crashed: boolean };
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * A lease's abort controller that knows whether it was aborted without making its signal: an
 * AbortSignal costs microseconds to build, most runs are never aborted, and most handlers never
 * read `ctx.signal`, so it is made only when read (or by abort() itself).
 */
class LeaseAbort extends AbortController {
  #aborted = false;
  override abort(reason?: unknown): void {
    this.#aborted = true;
    super.abort(reason);
  }
  /** Undefined while not aborted, else the signal's reason (what `afterRun` takes). */
  get state(): { readonly reason: unknown } | undefined {
    return this.#aborted ? { reason: this.signal.reason } : undefined;
  }
}

/** Whether a lease was aborted, and why, without building its signal when it was not. */
function abortState(lease: Lease): { readonly reason: unknown } | undefined {
  if (lease.abort instanceof LeaseAbort) return lease.abort.state;
  const signal = lease.abort.signal;
  return signal.aborted ? { reason: signal.reason } : undefined;
}

/**
 * One delivery through the worker: load the operation, triage it (`triageDelivery`, asking the
 * heartbeats only when it says so), and do what the triage says. A dispatch that names no known
 * operation is terminated with a WARNING. A database that cannot be reached is waited out with the
 * delivery held (`throughOutage`: listed in the heartbeat from receipt, kept from its ack-wait by
 * every beat), not handed back: a dispatch naked with a delay during a Postgres failover could be
 * dropped by the broker (nats-server 2.9 moved the consumer's ack floor past it while it was still
 * in the stream), leaving its operation SCHEDULED for the reconciler's floor. Only when the wait
 * gives up (the worker stops, its heartbeat is overdue) does the transport nak it.
 *
 * @example
 * ```ts
 * transport.consume(route, { concurrency, slots }, (d) => handleDelivery(core, d));
 * ```
 */
export async function handleDelivery(w: WorkerCore, d: Delivery): Promise<void> {
  const m = d.message;
  if (w.state.crashed) return;
  if (w.state.stopping) {
    d.nak(0);
    return;
  }
  // Listed from receipt (the load may wait on the database): released once it is settled, unless
  // it runs (the run holds and releases it itself) or was held already.
  const received = w.heartbeat.receive(
    { kind: m.kind, operationId: m.operationId, attempt: m.attempt },
    d,
  );
  try {
    await judge(w, d);
  } finally {
    if (received && !w.state.crashed && !w.registry.getSnapshot().context.leases.has(m.operationId))
      w.heartbeat.release(m.operationId, m.attempt);
  }
}

/** Loads the operation, triages the delivery and carries the triage out. */
async function judge(w: WorkerCore, d: Delivery): Promise<void> {
  const m = d.message;
  let op: OperationRecord;
  try {
    op = await throughOutage(w, `loading operation ${m.operationId}`, () =>
      w.batches.load(m.operationId),
    );
  } catch (err) {
    const code = err instanceof OpstateError ? err.code : undefined;
    if (code !== OpstateErrorCode.NOT_FOUND && code !== OpstateErrorCode.BAD_INPUT) throw err;
    w.logger.log('WARNING', 'dispatch names no known operation; dropped', {
      ...m,
      err,
    });
    d.term();
    return;
  }
  const input = {
    message: m,
    stored: op,
    handled: w.handlerFor(op.kind) !== undefined,
    localAttempt: w.registry.getSnapshot().context.leases.get(op.id)?.attempt,
    deliveryCount: d.deliveryCount,
    now: w.clock.now(),
  };
  let triage = triageDelivery(input);
  if (triage.action === 'check_holder') {
    // Another worker's: this one lists the delivery itself from receipt. Only the heartbeat of the
    // worker that started it counts: another one listing it does not make it held.
    const holderAlive = await w.transport.heartbeats.isAlive(op.kind, op.id, op.attempt, {
      exceptWorkerId: w.id,
      ...(op.workerId === null ? {} : { holder: op.workerId }),
    });
    triage = triageDelivery({ ...input, holderAlive });
  }
  await settle(w, d, op, triage);
}

/** Carries out a triage. */
async function settle(w: WorkerCore, d: Delivery, op: OperationRecord, triage: Triage) {
  switch (triage.action) {
    case 'drop':
      w.logger.log('WARNING', 'dispatch kind does not match a handler of this worker; dropped', {
        ...d.message,
        storedKind: op.kind,
        reason: triage.reason,
      });
      d.term();
      return;
    case 'ack':
      await d.ack();
      return;
    case 'term':
      w.logger.log('DEBUG', 'dispatch terminated', { ...d.message, reason: triage.reason });
      d.term();
      return;
    case 'run':
      await run(w, d, op);
      return;
    case 'running_here':
      // This process runs it and the first delivery settles it. A healthy worker calls working()
      // at every heartbeat, so this points at a heartbeat interval too close to ack-wait.
      w.logger.log('WARNING', 'redelivery of an operation this worker is running; terminated', {
        operationId: op.id,
        attempt: op.attempt,
        deliveryCount: d.deliveryCount,
      });
      d.term();
      return;
    case 'check_holder':
    case 'held_elsewhere':
      d.term(); // a live worker holds it; the heartbeat monitor watches that worker
      return;
    case 'reclaim':
      await reclaim(w, d, op, triage.event);
      return;
  }
}

/** A redelivery of an attempt nobody holds any more: reset it by the broker path, then term. */
async function reclaim(w: WorkerCore, d: Delivery, op: OperationRecord, event: ResetEvent) {
  try {
    await w.store.apply(op.id, event, { expectedVersion: op.version, by: 'broker' });
    w.logger.log('WARNING', 'broker redelivery found no live holder; operation reset', {
      operationId: op.id,
      kind: op.kind,
      attempt: op.attempt,
    });
  } catch (err) {
    // A lost race (the operation moved meanwhile) is routine; anything else (the database
    // unreachable) leaves the delivery unsettled for the transport to redeliver.
    if (classifyFailure(err) !== 'lost_race') throw err;
    w.logger.log('DEBUG', 'broker-path reset lost a race; leaving it', {
      operationId: op.id,
      err,
    });
  }
  d.term();
}

/**
 * Aborts the handler once the attempt has run for its deadline since its START (the operation's
 * own `deadlineMs`, else its kind's), with a `DEADLINE_PASSED` reason: the handler should stop;
 * whatever it does after, the worker lets go (`afterRun`) and the control plane's deadline path
 * resets the attempt. Returns the timer to clear once the handler is done. (A deadline is at most
 * 7 days, within what a timer can wait.)
 */
function watchDeadline(w: WorkerCore, op: OperationRecord, lease: Lease): TimerHandle {
  const deadline = deadlineOf(op.kind, op.deadlineMs, w.deadlines);
  const left = deadline.ms - (w.clock.now() - lease.startedAt);
  return w.clock.setTimeout(
    () => {
      if (abortState(lease) !== undefined || w.state.crashed) return;
      const ranMs = w.clock.now() - lease.startedAt;
      const fields = {
        operationId: op.id,
        kind: op.kind,
        attempt: lease.attempt,
        deadlineMs: deadline.ms,
        ranMs,
      };
      w.logger.log('WARNING', 'attempt past its deadline: aborting its handler', fields);
      // This lease's own controller: the registry's entry may already be a newer attempt's.
      lease.abort.abort(
        new OpstateError(
          OpstateErrorCode.DEADLINE_PASSED,
          `deadline passed: attempt ${lease.attempt} of ${op.kind} ${op.id} has run for ${formatRunTime(ranMs)} since its START, past its deadline of ${describeDeadline(op.kind, deadline)}; the control plane resets it`,
          { retryable: true, details: fields },
        ),
      );
    },
    Math.max(0, left),
  );
}

/** SCHEDULED and handled here: cover by a heartbeat, START, run the handler, finish. */
async function run(w: WorkerCore, d: Delivery, scheduled: OperationRecord): Promise<void> {
  if (w.state.crashed) return;
  const started = await startAttempt(w, d, scheduled);
  if (started === undefined) return;
  const { op, startedAt } = started;
  const lease: Lease = {
    operationId: op.id,
    kind: op.kind,
    attempt: op.attempt,
    taskId: `${w.id}-${randomUUID().slice(0, 8)}`,
    startedAt,
    abort: new LeaseAbort(),
  };
  if (w.state.crashed) return; // died between START and the lease: recovery is the monitor's
  w.registry.trigger.leased({ lease });
  const deadline = watchDeadline(w, scheduled, lease);
  try {
    w.faults?.afterStart?.(d.message);
    const handler = w.handlerFor(op.kind) as OperationHandler;
    let outcome: HandlerOutcome;
    try {
      const result = await handler(handlerContext(w, op, lease));
      outcome = { ok: true, outputs: result?.outputs ?? [] };
    } catch (error) {
      outcome = { ok: false, error };
    }
    if (w.state.crashed) return;
    const next = afterRun({
      operation: op,
      outcome,
      abort: abortState(lease),
      stopping: w.state.stopping,
      now: w.clock.now(),
    });
    switch (next.action) {
      case 'complete':
        await completed(w, d, op, lease, next.outputs);
        return;
      case 'fail':
        await failed(w, d, op, next.event, next.line);
        return;
      case 'hand_back':
        // No longer listed in our heartbeat: the redelivery resets it by the broker path (or the
        // next worker's heartbeat-covered START claims it).
        w.heartbeat.release(op.id, op.attempt);
        await w.heartbeat.cover().catch(() => undefined);
        d.nak(0);
        return;
      case 'let_go':
        d.term(); // reset or cancelled: the operation has moved on without us
        writeLines(w.logger, [next.line]);
        return;
    }
  } finally {
    w.clock.clearTimeout(deadline);
    // This attempt's own: a later attempt of the operation started here since stays held.
    if (!w.state.crashed) w.heartbeat.release(op.id, op.attempt);
    w.registry.trigger.released({ operationId: op.id, attempt: op.attempt });
  }
}

/**
 * Holds the operation, writes a heartbeat that lists it and STARTs it by compare-and-set: the one
 * code path where any operation enters IN_PROGRESS. Returns the running attempt and its START's
 * time, or undefined when the delivery was settled otherwise (judged again after a lost
 * compare-and-set, or fenced).
 */
async function startAttempt(
  w: WorkerCore,
  d: Delivery,
  scheduled: OperationRecord,
): Promise<{ op: OperationView; startedAt: number } | undefined> {
  // Covered before it starts: if this process dies or stalls from here on, the heartbeat monitor
  // finds the operation in its last heartbeat.
  w.heartbeat.hold(
    { kind: scheduled.kind, operationId: scheduled.id, attempt: scheduled.attempt },
    d,
  );
  try {
    // Rejects when the beat could not list it (over the size cap): not started, handed back.
    await w.heartbeat.cover(scheduled.id);
    w.faults?.beforeStart?.(d.message);
    // The time the START records, which the deadline counts from (a retried write keeps it).
    const startedAt = w.clock.now();
    const started = await throughOutage(w, `starting operation ${scheduled.id}`, () =>
      w.batches.start({
        record: scheduled,
        event: {
          type: 'START',
          attempt: scheduled.attempt,
          workerId: w.id,
          at: isoText(new Date(startedAt)),
        },
        by: w.id,
      }),
    );
    return {
      op: {
        id: scheduled.id,
        kind: scheduled.kind,
        attempt: started.context.attempt,
        retryCount: started.context.retryCount,
      },
      startedAt,
    };
  } catch (err) {
    w.heartbeat.release(scheduled.id, scheduled.attempt);
    const refusal = onRefusal(err, 'start');
    if (refusal === 'raise') throw err;
    if (refusal === 'retriage')
      await handleDelivery(w, d); // someone moved it: judge it again
    else d.term();
    return undefined;
  }
}

/** What the handler sees: its attempt, an abort signal, heartbeats, journal steps, inspection. */
function handlerContext(w: WorkerCore, op: OperationView, lease: Lease): HandlerContext {
  const read = <T>(what: string, query: (db: Database, id: string) => Promise<T>) =>
    throughOutage(w, `${what} ${op.id}`, () => query(w.store.database, op.id), lease);
  return {
    operation: { id: op.id, kind: op.kind, attempt: op.attempt, retryCount: op.retryCount },
    get signal() {
      return lease.abort.signal;
    },
    heartbeat: () => w.heartbeat.cover(),
    step: (name, fn) => journalStep(w, op, lease, name, fn),
    // Reads of the runtime's own database for an attempt this worker holds wait out an outage as
    // its writes do: a handler should not fail, and spend a retry, because Postgres restarted.
    inspect: () => read('inspecting operation', inspectOperation),
    relations: () => read('relations of operation', inputRelations),
    requiredOutputs: () => read('required outputs of operation', requiredOutputsOf),
    withDatabase: (what, statement) =>
      throughOutage(w, `${what} operation ${op.id}`, () => statement(w.store.database), lease),
  };
}

/** The handler succeeded: output copies and COMPLETE in one transaction, then ack. */
async function completed(
  w: WorkerCore,
  d: Delivery,
  op: OperationView,
  lease: Lease,
  outputs: readonly OutputCopy[],
): Promise<void> {
  try {
    await throughOutage(
      w,
      `completing operation ${op.id}`,
      () => w.batches.complete({ id: op.id, attempt: op.attempt, outputs, by: w.id }),
      lease,
    );
  } catch (err) {
    const refusal = onRefusal(err, 'finish');
    if (refusal === 'fail') {
      // The result lacks what the kind must produce, or is malformed: the handler's failure, not
      // the completion's, and running it again would return the same (the error is not retryable).
      const next = afterRun({
        operation: op,
        outcome: { ok: false, error: err },
        abort: abortState(lease),
        stopping: w.state.stopping,
        now: w.clock.now(),
      });
      if (next.action === 'fail') await failed(w, d, op, next.event, next.line);
      else d.term();
      return;
    }
    if (refusal !== 'term') throw err;
    // Reset while we worked: our attempt is fenced and its completion refused. (Or a completion
    // that committed while its reply was lost to an outage, and was tried again.)
    w.logger.log('WARNING', 'completion refused: the operation moved on', {
      operationId: op.id,
      attempt: op.attempt,
      err,
    });
    d.term();
    return;
  }
  await d.ack();
}

/** The handler threw: FAIL the attempt (retryable or not), then ack. */
async function failed(
  w: WorkerCore,
  d: Delivery,
  op: OperationView,
  event: Extract<Parameters<OperationStore['apply']>[1], { type: 'FAIL' }>,
  line: Parameters<typeof writeLines>[1][number],
): Promise<void> {
  try {
    await throughOutage(w, `failing operation ${op.id}`, () =>
      w.store.apply(op.id, event, { by: w.id }),
    );
  } catch (err) {
    if (onRefusal(err, 'finish') !== 'term') throw err;
    d.term();
    return;
  }
  writeLines(w.logger, [line]);
  await d.ack();
}

/**
 * A durable journal step: run once, record the result; a re-run returns the record. A step not yet
 * recorded runs only while this attempt still holds the operation: not once the handler was
 * aborted, not when this worker's last heartbeat is past the timeout (it may have been presumed
 * dead while frozen), and not when the operation moved on — so a worker that wakes from a freeze
 * does not go on writing for an attempt given to another.
 */
async function journalStep<T>(
  w: WorkerCore,
  op: OperationView,
  lease: Lease,
  name: string,
  fn: () => Promise<T>,
): Promise<T> {
  const holds = (moved?: { operationId: string; attempt: number; reason: string }) => {
    const overdue = overdueAge(w);
    if (overdue !== undefined) fenceOverdue(w, overdue);
    if (moved !== undefined) w.registry.trigger.abort(moved);
    const signal = lease.abort.signal;
    if (signal.aborted || moved !== undefined || overdue !== undefined) {
      throw new Error(`step ${name} not run: ${messageOf(signal.reason ?? moved?.reason)}`);
    }
  };
  holds();
  const what = `journal step ${name} of operation ${op.id}`;
  const recorded = await throughOutage(w, what, () => w.journal.getStep(op.id, name), lease);
  if (recorded !== undefined) return recorded.result as T;
  holds(movedOn([lease], await throughOutage(w, what, () => w.store.loadMany([op.id]), lease))[0]);
  const result = await fn();
  if (w.state.crashed) throw new Error('worker crashed'); // a dead process records nothing
  const { step: stored } = await throughOutage(
    w,
    what,
    () =>
      w.journal.recordStep({
        operationId: op.id,
        attempt: op.attempt,
        name,
        state: 'done',
        result,
      }),
    lease,
  );
  // What was stored, so that this run and a re-run see the same value.
  return stored.result as T;
}

/**
 * The worker's own writes for an attempt it holds (START, COMPLETE, FAIL, a journal step) wait out
 * a database outage instead of failing the delivery: a failed delivery comes back to the broker
 * path, which resets the attempt and spends a retry of the operation's budget on what is nobody's
 * failure (a Postgres restarted often enough took operations to FAILED that way). Meanwhile the
 * heartbeat still lists the operation, so no one else takes it. The wait ends, and the outage is
 * thrown as before, once the worker stops or crashes, its heartbeat is overdue or the attempt was
 * aborted; a crashed worker writes nothing more.
 */
function throughOutage<T>(
  w: WorkerCore,
  what: string,
  write: () => Promise<T>,
  lease?: Lease,
): Promise<T> {
  return untilReachable(
    `Postgres (${what})`,
    () => (w.state.crashed ? Promise.reject(new Error('worker crashed')) : write()),
    {
      logger: w.logger,
      clock: w.clock,
      initialBackoffMs: 100,
      maxBackoffMs: 2_000,
      reachedThen: 'going on',
      waitLevel: 'INFO',
      giveUp: () => {
        if (w.state.crashed) return 'the worker crashed';
        if (w.state.stopping) return 'the worker is stopping';
        if (lease?.abort.signal.aborted === true) return 'the attempt was aborted';
        const overdue = overdueAge(w);
        return overdue === undefined
          ? undefined
          : `the worker's heartbeat is ${Math.round(overdue)} ms old, past the timeout`;
      },
    },
  );
}

/** The age of this worker's last heartbeat that landed, when it is past the timeout. */
function overdueAge(w: WorkerCore): number | undefined {
  const age = w.heartbeat.age();
  return age > w.transport.timing.heartbeatTimeoutMs ? age : undefined;
}

/**
 * This worker's last heartbeat that landed is older than the timeout: the control plane may have
 * reset what it runs and given it to another worker. It aborts every handler it runs (they let go;
 * an operation not reset is the heartbeat monitor's to reset), before it writes anything more.
 */
export function fenceOverdue(w: WorkerCore, ageMs: number): void {
  const leases = [...w.registry.getSnapshot().context.leases.values()];
  const live = leases.filter((l) => !l.abort.signal.aborted);
  if (live.length === 0) return;
  w.logger.log('WARNING', 'worker heartbeat overdue: aborting what it runs', {
    workerId: w.id,
    heartbeatAgeMs: Math.round(ageMs),
    heartbeatTimeoutMs: w.transport.timing.heartbeatTimeoutMs,
    operations: live.map((l) => l.operationId),
  });
  for (const l of live) {
    w.registry.trigger.abort({
      operationId: l.operationId,
      attempt: l.attempt,
      reason: `this worker's last heartbeat is ${Math.round(ageMs)} ms old, past the heartbeat timeout (${w.transport.timing.heartbeatTimeoutMs} ms): presumed dead, it lets go`,
    });
  }
}

/**
 * After each beat: one read of the running operations, and an abort for each one that moved on
 * (`movedOn`).
 */
export async function abortMovedOn(w: WorkerCore, slots: { held: number; free: number }) {
  const leases = [...w.registry.getSnapshot().context.leases.values()];
  w.logger.log('DEBUG', 'worker beat', {
    workerId: w.id,
    running: leases.length,
    held: w.heartbeat.held().length,
    slotsHeld: slots.held,
    slotsFree: slots.free,
  });
  if (leases.length === 0) return;
  const current = await w.store.loadMany(leases.map((l) => l.operationId));
  for (const moved of movedOn(leases, current)) w.registry.trigger.abort(moved);
}
