import { randomUUID } from 'node:crypto';
import { classifyFailure } from '../machines/classifyFailure.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import { defaultRoute, queueName, type Route } from '../machines/routing.ts';
import { checkId, notFound } from '../persistence/applyEvents.ts';
import type { CompleteItem } from '../persistence/completeWithOutputs.ts';
import { type InputRelations, inputRelations } from '../persistence/inputRelations.ts';
import { inspectOperation, type OperationInspection } from '../persistence/inspectOperation.ts';
import type { JournalRepository } from '../persistence/JournalRepository.ts';
import type { OperationRecord } from '../persistence/OperationRecord.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import { requiredOutputsOf } from '../persistence/requiredOutputsOf.ts';
import { DeliverySlots } from '../transport/DeliverySlots.ts';
import { workerHeartbeatKey } from '../transport/HeartbeatKey.ts';
import type { Delivery, Subscription, Transport } from '../transport/Transport.ts';
import { createBatcher } from './Batcher.ts';
import type { Clock } from './Clock.ts';
import type { Logger } from './Logger.ts';
import { triageDelivery } from './triageDelivery.ts';
import { startWorkerHeartbeat } from './WorkerHeartbeat.ts';
import { createWorkerRegistry, type Lease, type WorkerRegistry } from './workerRegistry.ts';

/** What a handler sees of its operation. */
export interface OperationView {
  readonly id: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  readonly retryCount: number;
}

/** The attempt this worker holds. */
type Running = OperationView;

/** The context a stage handler runs with. */
export interface HandlerContext {
  readonly operation: OperationView;
  /**
   * A durable journal step: runs `fn` once and records its JSON result; a re-run (a later
   * attempt after a crash) returns the recorded result instead of repeating the side effect.
   */
  step<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** Writes the worker's heartbeat now (it also beats at the interval on its own). */
  heartbeat(): Promise<void>;
  /** Aborts when the operation is reset or cancelled, or the worker stops. */
  readonly signal: AbortSignal;
  /** The whole operation: subtype fields, input copies, history (one read, on demand). */
  inspect(): Promise<OperationInspection>;
  /**
   * Each input copy with its artifact's relations (one indexed query, on demand): the raw data
   * packages a data transfer package holds, the files of a raw data package, and the package a
   * file or a package belongs to.
   *
   * @example
   * ```ts
   * const [bundle] = await ctx.relations();
   * for (const pkg of bundle?.members ?? []) await unpackOne(bundle.path, pkg.id);
   * ```
   */
  relations(): Promise<readonly InputRelations[]>;
  /**
   * What this operation must return among its outputs by its kind's output contract
   * (`OUTPUT_CONTRACT`): the completion fails the attempt for good (`OUTPUT_CONTRACT`) when one
   * is missing. One query, on demand.
   *
   * @example
   * ```ts
   * const required = await ctx.requiredOutputs(); // [{ artifactType, artifactId, locationId }]
   * return { outputs: required.map((c) => ({ ...c, path: pathOf(c), checksum })) };
   * ```
   */
  requiredOutputs(): Promise<readonly OutputCopy[]>;
}

/** What a handler returns: the copies it produced, created with the completion. */
export interface HandlerResult {
  readonly outputs?: readonly OutputCopy[];
}

export type OperationHandler = (ctx: HandlerContext) => Promise<HandlerResult | undefined>;

export interface WorkerOptions<K extends OperationKind> {
  readonly store: OperationStore;
  readonly journal: JournalRepository;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly kinds: readonly K[];
  /** One handler for every kind this worker serves: the table must name them all. */
  readonly handlers: Readonly<Record<K, OperationHandler>>;
  /**
   * Operations this worker holds at once across all its queues, pulled or running (default 4).
   * With fewer slots than queues, the queues take turns.
   */
  readonly concurrency?: number;
  /** Routes to consume; default: each kind's default route. */
  readonly routes?: readonly Route[];
  readonly workerId?: string;
  /** Fault-injection points for crash drills; never set in normal operation. */
  readonly faults?: WorkerFaults;
}

/**
 * Where a crash drill may stop a worker. Each runs synchronously at its point; a drill makes it
 * kill the process (`process.kill(process.pid, 'SIGKILL')`).
 */
export interface WorkerFaults {
  /** After a dispatch was received and covered by a heartbeat, before START is written. */
  beforeStart?(message: Delivery['message']): void;
  /** After START was committed, before the handler runs. */
  afterStart?(message: Delivery['message']): void;
}

export interface Worker {
  readonly id: string;
  readonly registry: WorkerRegistry;
  /** Stops taking work, aborts running handlers and hands their operations back. */
  stop(): Promise<void>;
  /**
   * Dies as a killed process would, for drills in one process: its heartbeat stops where it is,
   * nothing is written to the database or the heartbeat store, deliveries are left unsettled.
   * Recovery is then up to the heartbeat monitor, the reconciler and the broker.
   */
  crash(): Promise<void>;
}

type StartItem = Parameters<OperationStore['applyManyTo']>[0][number];

function unwrap<R extends { ok: boolean }>(result: R): Extract<R, { ok: true }> {
  if (!result.ok) throw (result as unknown as { error: OpstateError }).error;
  return result as Extract<R, { ok: true }>;
}

/** How a handler failure is classified: an `OpstateError` says; anything else is retryable. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof OpstateError) return err.retryable;
  if (typeof err === 'object' && err !== null && 'retryable' in err) {
    return (err as { retryable: unknown }).retryable !== false;
  }
  return true;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function codeOf(err: unknown): OpstateErrorCode | undefined {
  return err instanceof OpstateError ? err.code : undefined;
}

/**
 * The worker base: the one place where any operation, of any kind, enters IN_PROGRESS.
 *
 * On a dispatch it loads the operation and decides (`triageDelivery`): COMPLETED → ack (early
 * return); a stale attempt → term; SCHEDULED → hold it, write a heartbeat that lists it, START by
 * compare-and-set, run the handler; IN_PROGRESS of the current attempt with no live holder (a
 * broker redelivery after the holder died) → RESET by `broker`, so the next attempt is dispatched
 * fenced. On success it creates the output copies and COMPLETEs in one transaction, then acks; on
 * failure it FAILs (retryable or not) and acks. A result that lacks what the kind must produce
 * (`OUTPUT_CONTRACT`) is a failure, never retried.
 *
 * The worker beats once per heartbeat interval for everything it holds (one key in the heartbeat
 * store), and covers an operation with a heartbeat before it starts it: an operation it holds,
 * pulled or running, is recovered by the heartbeat monitor within about the heartbeat timeout if
 * this process dies or stalls. At each beat it checks in one read whether its running operations
 * moved on (reset, cancelled) and aborts their handlers.
 *
 * @example
 * ```ts
 * const worker = startWorker({ store, transport, clock, logger, kinds: [OperationKind.TRANSFER],
 *   handlers: { [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await copyOver(ctx) }) } });
 * await worker.stop();
 * ```
 */
export function startWorker<K extends OperationKind>(options: WorkerOptions<K>): Worker {
  const { store, journal, transport, clock, logger, kinds, handlers } = options;
  const id = options.workerId ?? `worker-${randomUUID().slice(0, 8)}`;
  try {
    workerHeartbeatKey(id);
  } catch (err) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `worker id ${JSON.stringify(id)} cannot name a heartbeat: use letters, digits, '-', '_' or '=' (no dots)`,
      { cause: err },
    );
  }
  const concurrency = options.concurrency ?? 4;
  const registry = createWorkerRegistry();
  const handlerFor = (kind: OperationKind): OperationHandler | undefined =>
    (handlers as Partial<Record<OperationKind, OperationHandler>>)[kind];
  let stopping = false;
  let crashed = false;

  // Hot-path writes go out in batches across concurrent deliveries (group commit).
  const max = Math.max(16, concurrency * 4);
  const loads = createBatcher(
    async (ids: string[]) => {
      const found = await store.loadMany(ids);
      return ids.map((i) => found.get(i) ?? notFound(i));
    },
    { max, inFlight: 2 },
  );
  const load = async (operationId: string): Promise<OperationRecord> => {
    checkId(operationId); // a malformed id fails alone, never its batch
    const r = await loads.submit(operationId);
    if (r instanceof OpstateError) throw r;
    return r;
  };
  const starts = createBatcher((items: StartItem[]) => store.applyManyTo(items), {
    max,
    inFlight: 2,
  });
  const completes = createBatcher((items: CompleteItem[]) => store.completeMany(items), {
    max,
    inFlight: 2,
  });

  const routes =
    options.routes ??
    kinds
      .map(defaultRoute)
      .filter((r, i, all) => all.findIndex((o) => queueName(o) === queueName(r)) === i);

  async function onDelivery(d: Delivery): Promise<void> {
    const m = d.message;
    if (crashed) return;
    if (stopping) {
      d.nak(0);
      return;
    }
    let op: OperationRecord;
    try {
      op = await load(m.operationId);
    } catch (err) {
      if (
        codeOf(err) === OpstateErrorCode.NOT_FOUND ||
        codeOf(err) === OpstateErrorCode.BAD_INPUT
      ) {
        logger.log('WARNING', 'dispatch names no known operation; dropped', {
          ...m,
          error: messageOf(err),
        });
        d.term();
        return;
      }
      throw err; // the database is unreachable: the transport naks and redelivers later
    }
    const triage = triageDelivery({
      message: m,
      stored: op,
      handled: handlerFor(op.kind) !== undefined,
      localAttempt: registry.getSnapshot().context.leases[op.id]?.attempt,
    });
    switch (triage.action) {
      case 'drop':
        logger.log('WARNING', 'dispatch kind does not match a handler of this worker; dropped', {
          ...m,
          storedKind: op.kind,
          reason: triage.reason,
        });
        d.term();
        return;
      case 'ack':
        await d.ack();
        return;
      case 'term':
        logger.log('DEBUG', 'dispatch terminated', { ...m, reason: triage.reason });
        d.term();
        return;
      case 'run':
        await run(d, op);
        return;
      case 'running_here':
        // This process runs it and the first delivery settles it. A healthy worker calls
        // working() at every heartbeat, so this points at a heartbeat interval too close to
        // ack-wait.
        logger.log('WARNING', 'redelivery of an operation this worker is running; terminated', {
          operationId: op.id,
          attempt: op.attempt,
          deliveryCount: d.deliveryCount,
        });
        d.term();
        return;
      case 'reclaim':
        await redelivered(d, op);
        return;
    }
  }

  /** A redelivery of the attempt that is IN_PROGRESS elsewhere: claim it back if nobody holds it. */
  async function redelivered(d: Delivery, op: OperationRecord): Promise<void> {
    if (await transport.heartbeats.isAlive(op.kind, op.id, op.attempt)) {
      d.term(); // a live worker holds it; the heartbeat monitor watches that worker
      return;
    }
    try {
      await store.apply(
        op.id,
        {
          type: 'RESET',
          by: 'broker',
          reason: `redelivered (delivery ${d.deliveryCount}) with no live holder`,
          attempt: op.attempt,
          at: new Date(clock.now()).toISOString(),
        },
        { expectedVersion: op.version, by: 'broker' },
      );
      logger.log('WARNING', 'broker redelivery found no live holder; operation reset', {
        operationId: op.id,
        kind: op.kind,
        attempt: op.attempt,
      });
    } catch (err) {
      // A lost race (the operation moved meanwhile) is routine; anything else (the database
      // unreachable) leaves the delivery unsettled for the transport to redeliver.
      if (classifyFailure(err) !== 'lost_race') throw err;
      logger.log('DEBUG', 'broker-path reset lost a race; leaving it', {
        operationId: op.id,
        error: messageOf(err),
      });
    }
    d.term();
  }

  async function run(d: Delivery, scheduled: OperationRecord): Promise<void> {
    const handler = handlerFor(scheduled.kind) as OperationHandler;
    if (crashed) return;
    // Covered before it starts: if this process dies or stalls from here on, the heartbeat monitor
    // finds the operation in its last heartbeat.
    heartbeat.hold(
      { kind: scheduled.kind, operationId: scheduled.id, attempt: scheduled.attempt },
      d,
    );
    let op: Running;
    try {
      await heartbeat.cover();
      options.faults?.beforeStart?.(d.message);
      const started = unwrap(
        await starts.submit({
          record: scheduled,
          event: {
            type: 'START',
            attempt: scheduled.attempt,
            workerId: id,
            at: new Date(clock.now()).toISOString(),
          },
          by: id,
        }),
      );
      op = {
        id: scheduled.id,
        kind: scheduled.kind,
        attempt: started.context.attempt,
        retryCount: started.context.retryCount,
      };
    } catch (err) {
      heartbeat.release(scheduled.id);
      const code = codeOf(err);
      if (code === OpstateErrorCode.CONFLICT) {
        // Someone moved it between our read and our write: judge the message again.
        await onDelivery(d);
        return;
      }
      if (code === OpstateErrorCode.STALE_ATTEMPT || code === OpstateErrorCode.INVALID_EVENT) {
        d.term();
        return;
      }
      throw err;
    }

    const lease: Lease = {
      operationId: op.id,
      kind: op.kind,
      attempt: op.attempt,
      taskId: `${id}-${randomUUID().slice(0, 8)}`,
      startedAt: clock.now(),
      abort: new AbortController(),
    };
    if (crashed) return; // died between START and the lease: recovery is the monitor's
    registry.trigger.leased({ lease });
    try {
      options.faults?.afterStart?.(d.message);
      const ctx: HandlerContext = {
        operation: { id: op.id, kind: op.kind, attempt: op.attempt, retryCount: op.retryCount },
        signal: lease.abort.signal,
        heartbeat: () => heartbeat.cover(),
        step: (name, fn) => step(op, name, fn),
        inspect: () => inspectOperation(store.database, op.id),
        relations: () => inputRelations(store.database, op.id),
        requiredOutputs: () => requiredOutputsOf(store.database, op.id),
      };
      let result: HandlerResult | undefined;
      try {
        result = await handler(ctx);
        if (lease.abort.signal.aborted) throw lease.abort.signal.reason;
      } catch (err) {
        if (crashed) return;
        await failed(d, op, lease, err);
        return;
      }
      if (crashed) return;
      await completed(d, op, lease, result?.outputs ?? []);
    } finally {
      if (!crashed) heartbeat.release(op.id);
      registry.trigger.released({ operationId: op.id });
    }
  }

  async function completed(
    d: Delivery,
    op: Running,
    lease: Lease,
    outputs: readonly OutputCopy[],
  ): Promise<void> {
    try {
      unwrap(await completes.submit({ id: op.id, attempt: op.attempt, outputs, by: id }));
    } catch (err) {
      const code = codeOf(err);
      // The result lacks what the kind must produce: the handler's failure, not the completion's,
      // and running it again would return the same (the error is not retryable).
      if (code === OpstateErrorCode.OUTPUT_CONTRACT) {
        await failed(d, op, lease, err);
        return;
      }
      if (code === OpstateErrorCode.STALE_ATTEMPT || code === OpstateErrorCode.INVALID_EVENT) {
        // Reset while we worked: our attempt is fenced and its completion refused.
        logger.log('WARNING', 'completion of a superseded attempt refused', {
          operationId: op.id,
          attempt: op.attempt,
          error: messageOf(err),
        });
        d.term();
        return;
      }
      throw err;
    }
    await d.ack();
  }

  async function failed(d: Delivery, op: Running, lease: Lease, err: unknown): Promise<void> {
    if (lease.abort.signal.aborted) {
      if (stopping) {
        // Hand it back: no longer listed in our heartbeat, the redelivery resets it by the broker
        // path (or the next worker's heartbeat-covered START claims it).
        heartbeat.release(op.id);
        await heartbeat.cover().catch(() => undefined);
        d.nak(0);
      } else {
        d.term(); // reset or cancelled: the operation has moved on without us
        logger.log('INFO', 'worker let go of an operation that moved on', {
          operationId: op.id,
          attempt: op.attempt,
          reason: String(
            lease.abort.signal.reason instanceof Error
              ? lease.abort.signal.reason.message
              : lease.abort.signal.reason,
          ),
        });
      }
      return;
    }
    const retryable = isRetryable(err);
    try {
      await store.apply(
        op.id,
        {
          type: 'FAIL',
          attempt: op.attempt,
          error: {
            message: messageOf(err).slice(0, 2000),
            retryable,
            ...(codeOf(err) ? { code: codeOf(err) } : {}),
          },
          at: new Date(clock.now()).toISOString(),
        },
        { by: id },
      );
    } catch (applyErr) {
      const code = codeOf(applyErr);
      if (code === OpstateErrorCode.STALE_ATTEMPT || code === OpstateErrorCode.INVALID_EVENT) {
        d.term();
        return;
      }
      throw applyErr;
    }
    logger.log('INFO', 'operation failed', {
      operationId: op.id,
      kind: op.kind,
      attempt: op.attempt,
      retryable,
      error: messageOf(err),
    });
    await d.ack();
  }

  async function step<T>(op: Running, name: string, fn: () => Promise<T>): Promise<T> {
    const recorded = await journal.getStep(op.id, name);
    if (recorded !== undefined) return recorded.result as T;
    const result = await fn();
    if (crashed) throw new Error('worker crashed'); // a dead process records nothing
    const { step: stored } = await journal.recordStep({
      operationId: op.id,
      attempt: op.attempt,
      name,
      state: 'done',
      result: result ?? null,
    });
    return stored.result as T;
  }

  /** After each beat: one read of the running operations; abort those that moved on. */
  async function abortMovedOn(): Promise<void> {
    const leases = Object.values(registry.getSnapshot().context.leases);
    logger.log('DEBUG', 'worker beat', {
      workerId: id,
      running: leases.length,
      held: heartbeat.held().length,
      slotsHeld: slots.held,
      slotsFree: slots.free,
    });
    if (leases.length === 0) return;
    const now = await store.loadMany(leases.map((l) => l.operationId));
    for (const lease of leases) {
      const current = now.get(lease.operationId);
      if (
        current === undefined ||
        current.attempt !== lease.attempt ||
        current.status !== OperationStatus.IN_PROGRESS
      ) {
        registry.trigger.abort({
          operationId: lease.operationId,
          reason: `operation moved to ${current?.status ?? 'nowhere'} at attempt ${current?.attempt ?? '?'}`,
        });
      }
    }
  }

  const heartbeat = startWorkerHeartbeat({
    workerId: id,
    transport,
    clock,
    logger,
    afterBeat: abortMovedOn,
  });

  // One bound for the whole worker, shared by all its queues.
  const slots = new DeliverySlots(concurrency);
  const subscriptions: Subscription[] = routes.map((route) =>
    transport.consume(route, { concurrency, slots }, onDelivery),
  );
  logger.log('INFO', 'worker started', {
    workerId: id,
    queues: routes.map(queueName),
    concurrency,
  });

  return {
    id,
    registry,
    async stop() {
      if (stopping) return;
      stopping = true;
      for (const lease of Object.values(registry.getSnapshot().context.leases)) {
        registry.trigger.abort({ operationId: lease.operationId, reason: 'worker stopping' });
      }
      await Promise.all(subscriptions.map((s) => s.stop()));
      await heartbeat.stop({ remove: true });
    },
    async crash() {
      if (crashed) return;
      crashed = true;
      stopping = true;
      await heartbeat.stop({ remove: false });
      for (const lease of Object.values(registry.getSnapshot().context.leases)) {
        registry.trigger.abort({ operationId: lease.operationId, reason: 'worker crashed' });
      }
      await Promise.all(subscriptions.map((s) => s.stop()));
      logger.log('WARNING', 'worker crashed (drill)', { workerId: id });
    },
  };
}
