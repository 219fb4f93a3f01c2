import { randomUUID } from 'node:crypto';
import { crashable, faultsOf } from '../loops/drill.ts';
import type { Clock, TimerHandle } from '../machines/Clock.ts';
import type { Deadlines } from '../machines/deadlines.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { queueName, type Route } from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import type { JournalRepository } from '../persistence/JournalRepository.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import { DeliverySlots } from '../transport/DeliverySlots.ts';
import { workerHeartbeatKey } from '../transport/HeartbeatKey.ts';
import type { Subscription, Transport } from '../transport/Transport.ts';
import { abortMovedOn, fenceOverdue, handleDelivery, type WorkerCore } from './handleDelivery.ts';
import { DEFAULT_DISCOVERY_INTERVAL_MS, planDiscovery } from './planDiscovery.ts';
import { createWorkerBatches } from './WorkerBatches.ts';
import { startWorkerHeartbeat } from './WorkerHeartbeat.ts';
import { createWorkerRegistry, type WorkerRegistry } from './workerRegistry.ts';

export { isRetryable } from './decideRun.ts';

import type { OperationHandler } from './OperationHandler.ts';
import type { WorkerFaults } from './WorkerFaults.ts';
import type { RunningWorker, WorkerServeOptions } from './WorkerServing.ts';

/** A worker's parts from its runtime, and what it serves (`WorkerServeOptions`). */
export interface WorkerOptions<K extends OperationKind> extends WorkerServeOptions<K> {
  readonly store: OperationStore;
  readonly journal: JournalRepository;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Each kind's deadline per attempt (an operation's own `deadlineMs` wins): past it the handler's
   * signal fires. The runtime passes its `timing.deadlines`, as its control plane reads them.
   */
  readonly deadlines: Deadlines;
}

/** A running worker, with its registry of held operations. */
export interface Worker extends RunningWorker {
  readonly registry: WorkerRegistry;
}

/** The worker's id, given or generated, refused with CONFIG when it cannot name a heartbeat. */
function workerIdOf(options: { readonly workerId?: string | undefined }): string {
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
  return id;
}

/**
 * The routes a worker consumes now: the given ones, else those `planDiscovery` finds among the
 * registered locations (`CONFIG` when it refuses the placement).
 */
async function routesOf<K extends OperationKind>(options: WorkerOptions<K>): Promise<Route[]> {
  if (options.routes !== undefined) return [...options.routes];
  const { site, locations } = options;
  const registered = await options.store.routedLocations(site);
  const found = planDiscovery(registered, { site, locations }, options.kinds);
  if (found.type === 'refused') {
    throw new OpstateError(OpstateErrorCode.CONFIG, `worker refused: ${found.reason}`, {
      details: { site, locations },
    });
  }
  return [...found.routes];
}

/** Reads the routes not read yet: ensures their consumers, then consumes them. */
async function readNew(
  core: WorkerCore,
  reading: Map<string, Subscription>,
  routes: readonly Route[],
  consume: (route: Route) => Subscription,
  ensures: boolean,
): Promise<string[]> {
  const fresh = routes.filter((r) => !reading.has(queueName(r)));
  if (fresh.length === 0) return [];
  if (ensures) await core.transport.ensure(fresh);
  for (const route of fresh) {
    if (core.state.stopping) break;
    reading.set(queueName(route), consume(route));
  }
  return fresh.map(queueName);
}

/**
 * The worker base: the one place where any operation, of any kind, enters IN_PROGRESS.
 *
 * On a dispatch it loads the operation and decides with the pure `triageDelivery`: COMPLETED →
 * ack (early return); a stale attempt → term; SCHEDULED → hold it, write a heartbeat that lists
 * it, START by compare-and-set, run the handler; IN_PROGRESS of the current attempt with no live
 * holder (a broker redelivery after the holder died) → RESET by `broker`, so the next attempt is
 * dispatched fenced. Once the handler is done the pure `afterRun` decides: on success it creates
 * the output copies and COMPLETEs in one transaction, then acks; on failure it FAILs (retryable
 * or not) and acks; reset, cancelled or stopping, it lets go or hands the operation back. A result
 * that lacks what the kind must produce (`OUTPUT_CONTRACT`) or returns malformed outputs
 * (`BAD_INPUT`) is a failure, never retried. The I/O
 * around those decisions is `handleDelivery`'s.
 *
 * The worker beats once per heartbeat interval for everything it holds and the queues it reads
 * (one key in the heartbeat store: idle, it still shows as serving its queues), and covers an operation with a heartbeat before it starts it: an operation it holds,
 * pulled or running, is recovered by the heartbeat monitor within about the heartbeat timeout if
 * this process dies or stalls. At each beat it checks in one read whether its running operations
 * moved on (reset, cancelled) and aborts their handlers. An attempt that runs past its deadline
 * (the operation's `deadlineMs`, else its kind's) has its handler aborted with `DEADLINE_PASSED`;
 * the control plane's deadline path resets it.
 *
 * @example
 * ```ts
 * const worker = startWorker({ store, journal, transport, clock, logger,
 *   deadlines: timing.deadlines, kinds: [OperationKind.TRANSFER],
 *   handlers: { [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await copyOver(ctx) }) } });
 * await worker.stop();
 * ```
 */
export function startWorker<K extends OperationKind>(options: WorkerOptions<K>): Worker {
  const { store, transport, logger, kinds } = options;
  const id = workerIdOf(options);
  const concurrency = options.concurrency ?? 4;
  const fixed = options.routes === undefined ? [] : [...new Set(options.routes.map(queueName))];
  const handlers = options.handlers as Partial<Record<OperationKind, OperationHandler>>;
  // One bound for the whole worker, shared by all its queues.
  const slots = new DeliverySlots(concurrency);
  const core: WorkerCore = {
    id,
    store,
    journal: options.journal,
    transport,
    clock: options.clock,
    logger,
    deadlines: options.deadlines,
    handlerFor: (kind) => handlers[kind],
    faults: faultsOf<WorkerFaults>(options),
    registry: createWorkerRegistry(),
    heartbeat: startWorkerHeartbeat({
      workerId: id,
      transport,
      clock: options.clock,
      logger,
      reads: { queues: fixed, kinds: [...new Set(kinds)] },
      afterBeat: () => abortMovedOn(core, slots),
      onOverdue: (ageMs) => fenceOverdue(core, ageMs),
    }),
    batches: createWorkerBatches(store, concurrency),
    state: { stopping: false, crashed: false },
  };
  const reading = new Map<string, Subscription>();
  const consume = (route: Route) =>
    transport.consume(route, { concurrency, slots }, (d) => handleDelivery(core, d));
  const discovery = startDiscovery(core, options, reading, consume);
  // Nothing is pulled before the id is claimed: a second process under a live worker's id takes
  // no work and writes no heartbeat. A placement refused (an unknown site) takes none either.
  const ready = core.heartbeat.claimed
    .then(async () => {
      if (core.state.stopping) return;
      await discovery.first();
      logger.log('INFO', 'worker started', {
        workerId: id,
        queues: [...reading.keys()],
        concurrency,
        ...(options.site === undefined ? {} : { site: options.site }),
      });
    })
    .catch(async (err: unknown) => {
      if (!core.state.stopping) {
        logger.log('ERROR', 'worker refused to start', { workerId: id, err });
        await stopReading(core, reading, discovery);
      }
      throw err;
    });
  // The caller sees the refusal through `ready`; an unread one is not an unhandled rejection.
  ready.catch(() => undefined);
  const abortAll = (reason: string) => {
    for (const lease of [...core.registry.getSnapshot().context.leases.values()]) {
      core.registry.trigger.abort({
        operationId: lease.operationId,
        attempt: lease.attempt,
        reason,
      });
    }
  };
  const worker: Worker = {
    id,
    registry: core.registry,
    ready,
    queues: () => [...reading.keys()],
    discover: () => discovery.now(),
    async stop() {
      if (core.state.stopping) return;
      abortAll('worker stopping');
      // None are added once stopping (a claim still pending consumes nothing when it lands).
      await stopReading(core, reading, discovery);
      await ready.catch(() => undefined);
    },
  };
  // A drill's crash (`crash(worker)` from opstate/testing): as a killed process would die, its
  // heartbeat stops where it is, nothing is written, deliveries are left unsettled.
  return crashable(worker, async () => {
    if (core.state.crashed) return;
    core.state.crashed = true;
    core.state.stopping = true;
    await core.heartbeat.stop({ remove: false });
    abortAll('worker crashed');
    discovery.stop();
    await Promise.all([...reading.values()].map((s) => s.stop()));
    logger.log('WARNING', 'worker crashed (drill)', { workerId: id });
  });
}

/** The discovery of a worker's queues: the first pass, one at once, and the timer. */
interface WorkerDiscovery {
  first(): Promise<void>;
  now(): Promise<void>;
  stop(): void;
}

/**
 * Reads the worker's routes: fixed ones once; discovered ones at start (`first`, which rejects
 * with `CONFIG` on a refused placement), then every discovery interval on the worker's clock, each
 * new queue said in the heartbeat and logged. A pass that fails (the database unreachable) is
 * logged and tried again at the next interval.
 */
function startDiscovery<K extends OperationKind>(
  core: WorkerCore,
  options: WorkerOptions<K>,
  reading: Map<string, Subscription>,
  consume: (route: Route) => Subscription,
): WorkerDiscovery {
  const kinds = [...new Set(options.kinds)];
  const intervalMs = options.discoveryIntervalMs ?? DEFAULT_DISCOVERY_INTERVAL_MS;
  let passing: Promise<void> | undefined;
  const pass = (): Promise<void> => {
    passing ??= (async () => {
      const routes = await routesOf(options);
      const ensures = options.ensuresConsumers !== false && options.routes === undefined;
      const added = await readNew(core, reading, routes, consume, ensures);
      if (added.length > 0 && !core.state.stopping) {
        await core.heartbeat.reading({ queues: [...reading.keys()], kinds });
        core.logger.log('INFO', 'worker reads new queues', { workerId: core.id, queues: added });
      }
    })().finally(() => {
      passing = undefined;
    });
    return passing;
  };
  let timer: TimerHandle;
  // Failed passes in a row: an outage is said once when it starts and once when it ends.
  let failures = 0;
  const schedule = () => {
    if (options.routes !== undefined || core.state.stopping) return;
    timer = core.clock.setTimeout(() => {
      pass()
        .then(() => {
          if (failures > 0) {
            core.logger.log('INFO', 'worker looks for new queues again', {
              workerId: core.id,
              failures,
            });
          }
          failures = 0;
        })
        .catch((err: unknown) => {
          failures++;
          core.logger.log(
            failures === 1 ? 'WARNING' : 'DEBUG',
            'worker could not look for new queues',
            { workerId: core.id, err, failures },
          );
        })
        .finally(schedule);
    }, intervalMs);
  };
  // Nothing is read before the first pass, which runs once the worker id is claimed.
  let started = false;
  return {
    first: () => {
      started = true;
      return pass().then(schedule);
    },
    now: () => (started && !core.state.stopping ? pass() : Promise.resolve()),
    stop: () => core.clock.clearTimeout(timer),
  };
}

async function stopReading(
  core: WorkerCore,
  reading: Map<string, Subscription>,
  discovery: WorkerDiscovery,
): Promise<void> {
  core.state.stopping = true;
  discovery.stop();
  await Promise.all([...reading.values()].map((s) => s.stop()));
  await core.heartbeat.stop({ remove: true });
}
