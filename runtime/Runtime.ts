import { type ControlPlaneLoops, startControlPlaneLoops } from '../control-plane/ControlPlane.ts';
import { startLeadership } from '../control-plane/Leadership.ts';
import {
  type CopyDeleter,
  type CopyDeleterOptions,
  startCopyDeleter,
} from '../deleter/CopyDeleter.ts';
import { crash, crashable } from '../loops/drill.ts';
import { type Clock, systemClock } from '../machines/Clock.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import type { Pipeline } from '../machines/pipeline.ts';
import type { Logger } from '../observe/Logger.ts';
import { logTransportEvents } from '../observe/logTransportEvents.ts';
import { ObservedOperationStore } from '../observe/ObservedOperationStore.ts';
import { createPinoLogger } from '../observe/pinoLogger.ts';
import { composeObservers, loggingObserver } from '../observe/RuntimeObserver.ts';
import type { ActiveOperation } from '../persistence/ActiveOperation.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { FlowLimitRepository } from '../persistence/FlowLimitRepository.ts';
import { GroupRepository } from '../persistence/GroupRepository.ts';
import { inspectOperation } from '../persistence/inspectOperation.ts';
import { JournalRepository } from '../persistence/JournalRepository.ts';
import { LineageRepository } from '../persistence/LineageRepository.ts';
import { migrate } from '../persistence/migrate.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { activePages } from '../persistence/reads/activePages.ts';
import { observerRefusal } from '../transport/jetstream/observedBucket.ts';
import type { Transport } from '../transport/Transport.ts';
import { startWorker, type Worker } from '../worker/Worker.ts';
import type { WorkerServeOptions } from '../worker/WorkerServing.ts';
import { secretsOf } from './Configuration.ts';
import { configurationOf, openServers } from './openServers.ts';
import { applyOperatorCommand } from './operatorCommand.ts';
import type { ControlPlane, Runtime as PublicRuntime } from './PublicRuntime.ts';
import type { RuntimeOptions } from './RuntimeOptions.ts';
import { type RuntimeTiming, resolveRuntimeTiming } from './RuntimeTiming.ts';
import { rollbackFor } from './rollbackOnRequest.ts';
import { resolveServiceName } from './serviceName.ts';
import { releaseClaim, stageFor } from './stagingOnRequest.ts';

export type { ControlPlane } from './PublicRuntime.ts';
export type { RuntimeOptions, StartupWait } from './RuntimeOptions.ts';
export { type RuntimeTiming, resolveRuntimeTiming };

/** A worker's options without what the runtime supplies (store, transport, clock, logger, deadlines). */
export type StartWorkerOptions<K extends OperationKind> = WorkerServeOptions<K>;

/**
 * The runtime with its internals: the public `Runtime` (`PublicRuntime.ts`) and the database,
 * the store and the repositories behind it, which the repository's own code, tests and drills
 * reach (`internalsOf` in `opstate/internal`).
 */
export interface Runtime extends PublicRuntime {
  readonly database: Database;
  readonly store: OperationStore;
  readonly artifacts: ArtifactRepository;
  readonly groups: GroupRepository;
  readonly lineage: LineageRepository;
  readonly journal: JournalRepository;
  readonly limits: FlowLimitRepository;
  startWorker<K extends OperationKind>(options: StartWorkerOptions<K>): Worker;
  startCopyDeleter(
    options?: Omit<CopyDeleterOptions, 'database' | 'clock' | 'logger'>,
  ): CopyDeleter;
}

/**
 * Opens a runtime. Each setting comes from its option, else from the environment, resolved and
 * validated by `loadConfiguration` as the CLI's are: a bad value (`NATS_URL=http://…`,
 * `OPSTATE_TIMING=soon`) is refused at once with `CONFIG`, naming the variable or option and
 * what it allows. With no `databaseUrl`/`DATABASE_URL` it runs on an embedded database; with no
 * `natsUrl`/`NATS_URL` on the in-process transport (everything in one process). With both set,
 * workers run anywhere that reaches NATS and Postgres.
 *
 * @example
 * ```ts
 * const runtime = await createRuntime();
 * const plane = runtime.startControlPlane();
 * runtime.startWorker({ kinds: [OperationKind.TRANSFER],
 *   handlers: { [OperationKind.TRANSFER]: async (ctx) => ({ outputs: [await copyOver(ctx)] }) } });
 * const id = await runtime.submit({ kind: OperationKind.TRANSFER, fields: { ... }, by: 'ingest' });
 * ```
 */
export async function createRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const config = configurationOf(options);
  const { prefix } = config;
  const natsUrl = config.nats.url;
  const logger =
    options.logger ?? createPinoLogger({ level: config.logLevel, secrets: secretsOf(config) });
  const clock = options.clock ?? systemClock;
  const timing = resolveRuntimeTiming(config.timing, config.deadlines);
  const serviceName = await resolveServiceName(config.serviceName);
  const { database, transport } = await openServers(options, { config, timing, logger, clock });
  const stopLogging = logTransportEvents(transport, logger, clock);
  const store: OperationStore = new ObservedOperationStore(database, {
    clock,
    observer: composeObservers(loggingObserver(logger), options.observer),
  });
  const shared: Shared = {
    database,
    store,
    journal: new JournalRepository(database),
    transport,
    clock,
    logger,
    timing,
    prefix,
    inProcess: natsUrl === undefined,
    ensuresConsumers: options.ensureTransport ?? options.natsObserver !== true,
    workers: new Set(),
    planes: new Set(),
    deleters: new Set(),
    wakers: new Set(),
    pipeline: options.pipeline,
  };
  const wake = () => {
    for (const w of shared.wakers) w.wake();
    // A local worker reads a location registered since its last discovery pass at once, not an
    // interval later (a failed pass is logged by the worker's own timer, which tries again).
    for (const w of shared.workers) void w.discover().catch(() => undefined);
  };
  const withDefaults = submissionDefaults(options.maxRetries, serviceName);
  return {
    database,
    store,
    artifacts: new ArtifactRepository(database),
    groups: new GroupRepository(database),
    lineage: new LineageRepository(database),
    journal: shared.journal,
    limits: new FlowLimitRepository(database),
    transport,
    timing,
    logger,
    serviceName,
    mode: { database: database.dialect, transport: shared.inProcess ? 'in-process' : 'jetstream' },
    migrate: () => migrate(database),
    async submit(input) {
      const id = await store.create(withDefaults(input));
      wake();
      return id;
    },
    async submitMany(inputs) {
      const ids = await store.createMany(inputs.map(withDefaults));
      wake();
      return ids;
    },
    get: (id) => inspectOperation(database, id),
    async command(id, event, options) {
      const applied = await applyOperatorCommand(store, clock, id, event, options?.by);
      wake();
      return applied;
    },
    stage: (request) => stageFor({ database, clock, wake }, request, serviceName),
    release: (groupId, o) => releaseClaim(database, groupId, o?.by ?? serviceName),
    rollback: (request) =>
      rollbackFor({ database, clock, wake, pipeline: options.pipeline }, request, serviceName),
    startControlPlane: () => {
      if (options.natsObserver === true) throw observerRefusal('run a control plane');
      return startPlane(shared);
    },
    startWorker: (workerOptions) => {
      if (options.natsObserver === true) throw observerRefusal('run a worker');
      return startTrackedWorker(shared, workerOptions);
    },
    startCopyDeleter(deleterOptions = {}) {
      const deleter = startCopyDeleter({ database, clock, logger, ...deleterOptions });
      shared.deleters.add(deleter);
      return deleter;
    },
    async close() {
      await Promise.all([...shared.deleters].map((d) => d.stop()));
      await Promise.all([...shared.workers].map((w) => w.stop()));
      await Promise.all([...shared.planes].map((p) => p.stop()));
      await transport.close();
      stopLogging();
      await database.close();
    },
  };
}

/** Fills what a submission leaves out: the runtime's service as its submitter, its retry budget. */
function submissionDefaults(
  maxRetriesByDefault: number | undefined,
  serviceName: string,
): (input: CreateOperationInput) => CreateOperationInput {
  return (input) => {
    const maxRetries = input.maxRetries ?? maxRetriesByDefault;
    return {
      ...input,
      by: input.by ?? serviceName,
      ...(maxRetries === undefined ? {} : { maxRetries }),
    };
  };
}

/** What a runtime's parts share: its servers, its clock and logger, and what it started. */
interface Shared {
  readonly database: Database;
  readonly store: OperationStore;
  readonly journal: JournalRepository;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timing: RuntimeTiming;
  readonly prefix: string;
  readonly inProcess: boolean;
  /** Whether this process creates consumers on NATS (`ensureTransport`): its workers do too. */
  readonly ensuresConsumers: boolean;
  readonly workers: Set<Worker>;
  readonly planes: Set<ControlPlane>;
  readonly deleters: Set<CopyDeleter>;
  /** The control-plane loops of this process while it leads: woken when work is submitted. */
  readonly wakers: Set<ControlPlaneLoops>;
  /** The pipeline its control plane runs, if any. */
  readonly pipeline: Pipeline | undefined;
}

/** Contends for leadership; while it leads, runs the control-plane loops and lets them be woken. */
function startPlane(shared: Shared): ControlPlane {
  const { database, store, transport, clock, logger, timing } = shared;
  const leadership = startLeadership({
    database,
    name: shared.prefix,
    pollMs: timing.leaderPollMs,
    leaseMs: timing.leaderLeaseMs,
    clock,
    logger,
    onElected: async (term) => {
      if (shared.inProcess) await redispatchScheduled(store, transport, logger, clock);
      const loops = startControlPlaneLoops({
        store,
        transport,
        clock,
        logger,
        timing,
        deadlines: timing.deadlines,
        term,
        ...(shared.pipeline === undefined ? {} : { pipeline: shared.pipeline }),
      });
      shared.wakers.add(loops);
      return async () => {
        shared.wakers.delete(loops);
        await loops.stop();
      };
    },
  });
  const plane: ControlPlane = {
    holder: leadership.holder,
    get isLeader() {
      return leadership.isLeader;
    },
    async stop() {
      shared.planes.delete(plane);
      await leadership.stop();
    },
  };
  shared.planes.add(plane);
  return plane;
}

/** A worker the runtime stops on close (until it is stopped or crashed on its own). */
function startTrackedWorker<K extends OperationKind>(
  shared: Shared,
  workerOptions: StartWorkerOptions<K>,
): Worker {
  const { store, journal, transport, clock, logger } = shared;
  const worker = startWorker({
    store,
    journal,
    transport,
    clock,
    logger,
    deadlines: shared.timing.deadlines,
    ensuresConsumers: shared.ensuresConsumers,
    discoveryIntervalMs: shared.timing.discoveryIntervalMs,
    ...workerOptions,
  });
  shared.workers.add(worker);
  const tracked: Worker = {
    ...worker,
    async stop() {
      shared.workers.delete(worker);
      await worker.stop();
    },
  };
  return crashable(tracked, async () => {
    shared.workers.delete(worker);
    await crash(worker);
  });
}

/**
 * In-process dispatches live in memory: after a restart, every SCHEDULED operation has lost its
 * message. Publishing them again (dedup and fencing make it harmless) brings them home in
 * seconds instead of after the reconciler floor.
 */
async function redispatchScheduled(
  store: OperationStore,
  transport: Transport,
  logger: Logger,
  clock: Clock,
) {
  const scheduled: ActiveOperation[] = [];
  for await (const page of activePages(store, new Date(clock.now()), { status: 'SCHEDULED' })) {
    scheduled.push(...page);
  }
  if (scheduled.length === 0) return;
  const records = await store.loadMany(scheduled.map((o) => o.id));
  const items = [...records.values()].map((r) => ({
    route: r.route,
    message: {
      operationId: r.id,
      kind: r.kind,
      operationType: r.route.operationType,
      attempt: r.attempt,
    },
  }));
  await transport.publishMany(items);
  logger.log('INFO', 're-dispatched scheduled operations after start', { count: items.length });
}
