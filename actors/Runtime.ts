import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationEvent } from '../machines/operationMachine.ts';
import { allRoutes } from '../machines/routing.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { AppliedTransition } from '../persistence/applyEvents.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import type { DatabaseTls } from '../persistence/databaseTls.ts';
import { missingDriverGuard } from '../persistence/driverPatch.ts';
import { GroupRepository } from '../persistence/GroupRepository.ts';
import { inspectOperation, type OperationInspection } from '../persistence/inspectOperation.ts';
import { JournalRepository } from '../persistence/JournalRepository.ts';
import { LineageRepository } from '../persistence/LineageRepository.ts';
import { type MigrateResult, migrate } from '../persistence/migrate.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import {
  type Database,
  type EmbeddedEngine,
  type OpenDatabaseOptions,
  openDatabase,
} from '../persistence/openDatabase.ts';
import { createInProcessTransport } from '../transport/inprocess/createInProcessTransport.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import type { NatsCredentials } from '../transport/jetstream/natsCredentials.ts';
import type { Transport, TransportTiming } from '../transport/Transport.ts';
import { resolveTiming } from '../transport/TransportTiming.ts';
import { type Clock, systemClock } from './Clock.ts';
import {
  type ControlPlaneLoops,
  type ControlPlaneTiming,
  DEFAULT_CONTROL_PLANE_TIMING,
  startControlPlaneLoops,
} from './ControlPlane.ts';
import { type CopyDeleter, type CopyDeleterOptions, startCopyDeleter } from './CopyDeleter.ts';
import { startLeadership } from './Leadership.ts';
import type { Logger } from './Logger.ts';
import { logTransportEvents } from './logTransportEvents.ts';
import { ObservedOperationStore } from './ObservedOperationStore.ts';
import { createPinoLogger } from './pinoLogger.ts';
import { composeObservers, loggingObserver, type RuntimeObserver } from './RuntimeObserver.ts';
import { untilReachable } from './untilReachable.ts';
import { startWorker, type Worker, type WorkerOptions } from './Worker.ts';

/** Every timer of a runtime: the transport's (validated in order) plus the control plane's. */
export type RuntimeTiming = TransportTiming &
  ControlPlaneTiming & {
    /** How often the leader renews its lease and a standby tries to take a lapsed one [1 s]. */
    readonly leaderPollMs: number;
    /**
     * How long the leadership lease runs without renewal [10 s]: a frozen or dead leader is
     * replaced within this plus one poll. More than two polls.
     */
    readonly leaderLeaseMs: number;
  };

export interface RuntimeOptions {
  /** Postgres URL; default `DATABASE_URL`, else an embedded database in `dataDir`. */
  readonly databaseUrl?: string;
  /** The embedded database's folder when no URL (default `OPSTATE_DATA_DIR`, else `./.opstate`). */
  readonly dataDir?: string;
  /** NATS URL; default `NATS_URL`, else the in-process transport (one process). */
  readonly natsUrl?: string;
  /** NATS credentials (user and password, token, NKey or `.creds`) and TLS. */
  readonly natsCredentials?: NatsCredentials;
  /** TLS to Postgres. */
  readonly databaseTls?: DatabaseTls;
  /** The embedded database without a URL: a private Postgres server (default) or PGlite. */
  readonly embeddedEngine?: EmbeddedEngine;
  /** Settings of embedded PGlite. */
  readonly pglite?: OpenDatabaseOptions['pglite'];
  /** Names the deployment on NATS (stream, subjects, consumers, bucket) and the leader lock. */
  readonly prefix?: string;
  readonly timing?: Partial<RuntimeTiming>;
  /** Returns to PENDING an operation may take before it FAILS, unless it says (default 3). */
  readonly maxRetries?: number;
  /** Default: JSON lines on stderr (pino) at `OPSTATE_LOG_LEVEL`. */
  readonly logger?: Logger;
  /** Told of every committed transition (metrics); logging of transitions is built in. */
  readonly observer?: RuntimeObserver;
  readonly clock?: Clock;
  /** Apply migrations on open (default true). */
  readonly migrate?: boolean;
  /**
   * Create or update the dispatch stream and its consumers on open (default true). A worker
   * with least-privilege NATS credentials passes false: the control plane creates them.
   */
  readonly ensureTransport?: boolean;
  /**
   * Run embedded whatever the environment says: the embedded database in `dataDir` and the in-process transport,
   * ignoring `DATABASE_URL` and `NATS_URL` (the demo, tests of the embedded mode).
   */
  readonly embedded?: boolean;
  /**
   * Start even while Postgres or NATS is unreachable: wait for them, retrying with capped backoff
   * and saying so in the log, instead of failing (what `opstate control-plane` and `opstate
   * worker` do). A configuration error still fails at once. Default false.
   */
  readonly waitForServers?: boolean;
}

/** A worker's options without what the runtime supplies (store, transport, clock, logger). */
export type StartWorkerOptions<K extends OperationKind> = Omit<
  WorkerOptions<K>,
  'store' | 'journal' | 'transport' | 'clock' | 'logger'
>;

export interface ControlPlane {
  readonly isLeader: boolean;
  /** This replica's name in the leadership lease (`opstate status` shows the leader's). */
  readonly holder: string;
  stop(): Promise<void>;
}

function fromEnv(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
}

/** Resolves and validates every timer; a broken order is refused with `CONFIG`. */
export function resolveRuntimeTiming(overrides: Partial<RuntimeTiming> = {}): RuntimeTiming {
  const transport = resolveTiming(overrides);
  const plane: ControlPlaneTiming & { leaderPollMs: number; leaderLeaseMs: number } = {
    ...DEFAULT_CONTROL_PLANE_TIMING,
    monitorIntervalMs: Math.max(
      1,
      Math.min(transport.heartbeatIntervalMs, DEFAULT_CONTROL_PLANE_TIMING.monitorIntervalMs),
    ),
    reconcilerIntervalMs: Math.max(
      1,
      Math.min(
        Math.floor(transport.reconcilerFloorMs / 4),
        DEFAULT_CONTROL_PLANE_TIMING.reconcilerIntervalMs,
      ),
    ),
    leaderPollMs: 1_000,
    leaderLeaseMs: 10_000,
  };
  const picked = Object.fromEntries(
    Object.entries(overrides).filter(([k, v]) => v !== undefined && k in plane),
  );
  const merged = { ...transport, ...plane, ...picked } as RuntimeTiming;
  for (const k of Object.keys(plane) as (keyof typeof plane)[]) {
    const v = merged[k];
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `timer ${k} must be a positive integer; got ${String(v)}`,
      );
    }
  }
  if (!(merged.leaderLeaseMs > 2 * merged.leaderPollMs)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `leaderLeaseMs (${merged.leaderLeaseMs}) must exceed two leader polls (leaderPollMs ${merged.leaderPollMs}): a leader renews at every poll and must not lose its lease to one slow renewal; raise leaderLeaseMs`,
    );
  }
  return merged;
}

/** The embedded runtime of one deployment: the database, the transport and the actors on them. */
export interface Runtime {
  readonly database: Database;
  readonly store: OperationStore;
  /** Register locations, raw data files, packages and their copies. */
  readonly artifacts: ArtifactRepository;
  readonly groups: GroupRepository;
  readonly lineage: LineageRepository;
  readonly journal: JournalRepository;
  readonly transport: Transport;
  readonly timing: RuntimeTiming;
  readonly logger: Logger;
  /** Embedded (PGlite + in-process transport) or distributed. */
  readonly mode: {
    readonly database: 'postgres' | 'pglite';
    readonly transport: 'jetstream' | 'in-process';
  };
  /** Applies the committed migrations; harmless to repeat. */
  migrate(): Promise<MigrateResult>;
  /** Creates an operation (PENDING) and returns its id; a local control plane schedules it at once. */
  submit(input: CreateOperationInput): Promise<string>;
  /** Creates many operations in one statement (all or none) and returns their ids in order. */
  submitMany(inputs: readonly CreateOperationInput[]): Promise<string[]>;
  /** The operation with its subtype fields, copies, transitions and journal. */
  get(id: string): Promise<OperationInspection>;
  /** An operator command (`RETRY`, `RESET`, `CANCEL`); refused with the machine's reason. */
  command(id: string, event: OperationEvent): Promise<AppliedTransition>;
  /** Contends for leadership and runs the control-plane loops while leader. */
  startControlPlane(): ControlPlane;
  startWorker<K extends OperationKind>(options: StartWorkerOptions<K>): Worker;
  /** Starts a deleter: deletes copies the deletion policy cleans once their archive is verified. */
  startCopyDeleter(
    options?: Omit<CopyDeleterOptions, 'database' | 'clock' | 'logger'>,
  ): CopyDeleter;
  /** Stops workers, deleters and the control plane, then closes the transport and the database. */
  close(): Promise<void>;
}

/**
 * Opens a runtime. With no `databaseUrl`/`DATABASE_URL` it runs on embedded PGlite; with no
 * `natsUrl`/`NATS_URL` on the in-process transport (everything in one process). With both set,
 * workers run anywhere that reaches NATS and Postgres.
 *
 * @example
 * ```ts
 * const runtime = await createRuntime();
 * const plane = runtime.startControlPlane();
 * runtime.startWorker({ kinds: [OperationKind.TRANSFER],
 *   handlers: { [OperationKind.TRANSFER]: async (ctx) => ({ outputs: [await copyOver(ctx)] }) } });
 * const id = await runtime.submit({ kind: OperationKind.TRANSFER, fields: { ... } });
 * ```
 */
export async function createRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = options.logger ?? createPinoLogger();
  const clock = options.clock ?? systemClock;
  const timing = resolveRuntimeTiming(options.timing);
  const prefix = options.prefix ?? fromEnv('OPSTATE_PREFIX') ?? 'opstate';
  if (!/^[A-Za-z0-9_-]+$/.test(prefix)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `prefix '${prefix}' may hold only letters, digits, '-' and '_' (it names NATS subjects and streams)`,
    );
  }
  if (
    options.embedded === true &&
    (options.databaseUrl !== undefined || options.natsUrl !== undefined)
  ) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'embedded: true runs on the embedded database and the in-process transport; drop databaseUrl and natsUrl',
    );
  }
  const natsUrl = options.embedded === true ? undefined : (options.natsUrl ?? fromEnv('NATS_URL'));
  const database = await openDatabase({
    ...(options.databaseUrl === undefined ? {} : { databaseUrl: options.databaseUrl }),
    ...(options.databaseTls === undefined ? {} : { tls: options.databaseTls }),
    ...(options.pglite === undefined ? {} : { pglite: options.pglite }),
    ...(options.embeddedEngine === undefined ? {} : { engine: options.embeddedEngine }),
    ...(options.embedded === true
      ? { dataDir: options.dataDir ?? fromEnv('OPSTATE_DATA_DIR') ?? './.opstate', embedded: true }
      : options.dataDir === undefined
        ? {}
        : { dataDir: options.dataDir }),
  });
  if (database.dialect === 'postgres') {
    const problem = missingDriverGuard();
    if (problem !== undefined) logger.log('WARNING', problem);
  }
  let transport: Transport;
  const reach = <T>(what: string, attempt: () => Promise<T>) =>
    options.waitForServers === true ? untilReachable(what, attempt, { logger, clock }) : attempt();
  try {
    if (options.migrate !== false) await reach('Postgres', () => migrate(database));
    transport =
      natsUrl === undefined
        ? createInProcessTransport({ timing })
        : await reach('NATS', () =>
            createJetStreamTransport({
              servers: natsUrl,
              prefix,
              timing,
              ...(options.natsCredentials === undefined
                ? {}
                : { credentials: options.natsCredentials }),
            }),
          );
    const ready = transport;
    if (options.ensureTransport !== false) {
      await reach('NATS JetStream', () => ready.ensure(allRoutes()));
    }
  } catch (err) {
    await database.close().catch(() => undefined);
    throw err;
  }
  const stopLogging = logTransportEvents(transport, logger, clock);
  const store: OperationStore = new ObservedOperationStore(database, {
    clock: () => new Date(clock.now()),
    observer: composeObservers(loggingObserver(logger), options.observer),
  });
  const journal = new JournalRepository(database);
  const workers = new Set<Worker>();
  const planes = new Set<ControlPlane>();
  const deleters = new Set<CopyDeleter>();
  const wakers = new Set<ControlPlaneLoops>();
  const inProcess = natsUrl === undefined;
  const withDefaults = (input: CreateOperationInput): CreateOperationInput =>
    input.maxRetries === undefined && options.maxRetries !== undefined
      ? { ...input, maxRetries: options.maxRetries }
      : input;

  const runtime: Runtime = {
    database,
    store,
    artifacts: new ArtifactRepository(database),
    groups: new GroupRepository(database),
    lineage: new LineageRepository(database),
    journal,
    transport,
    timing,
    logger,
    mode: { database: database.dialect, transport: inProcess ? 'in-process' : 'jetstream' },
    migrate: () => migrate(database),
    async submit(input) {
      const id = await store.create(withDefaults(input));
      for (const w of wakers) w.wake();
      return id;
    },
    async submitMany(inputs) {
      const ids = await store.createMany(inputs.map(withDefaults));
      for (const w of wakers) w.wake();
      return ids;
    },
    get: (id) => inspectOperation(database, id),
    async command(id, event) {
      if (event.type !== 'RETRY' && event.type !== 'RESET' && event.type !== 'CANCEL') {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `${event.type} is a worker or scheduler event; an operator may send RETRY, RESET or CANCEL`,
        );
      }
      const applied = await store.apply(
        id,
        { ...event, at: new Date(clock.now()).toISOString() },
        { by: 'operator' },
      );
      for (const w of wakers) w.wake();
      return applied;
    },
    startControlPlane() {
      let loops: ControlPlaneLoops | undefined;
      const leadership = startLeadership({
        database,
        name: prefix,
        pollMs: timing.leaderPollMs,
        leaseMs: timing.leaderLeaseMs,
        clock,
        logger,
        onElected: async (term) => {
          if (inProcess) await redispatchScheduled(store, transport, logger);
          loops = startControlPlaneLoops({ store, transport, clock, logger, timing, term });
          wakers.add(loops);
          const mine = loops;
          return async () => {
            wakers.delete(mine);
            await mine.stop();
          };
        },
      });
      const plane: ControlPlane = {
        holder: leadership.holder,
        get isLeader() {
          return leadership.isLeader;
        },
        async stop() {
          planes.delete(plane);
          await leadership.stop();
        },
      };
      planes.add(plane);
      return plane;
    },
    startWorker(workerOptions) {
      const worker = startWorker({
        store,
        journal,
        transport,
        clock,
        logger,
        ...workerOptions,
      });
      workers.add(worker);
      return {
        ...worker,
        async stop() {
          workers.delete(worker);
          await worker.stop();
        },
        async crash() {
          workers.delete(worker);
          await worker.crash();
        },
      };
    },
    startCopyDeleter(deleterOptions = {}) {
      const deleter = startCopyDeleter({ database, clock, logger, ...deleterOptions });
      deleters.add(deleter);
      return deleter;
    },
    async close() {
      await Promise.all([...deleters].map((d) => d.stop()));
      await Promise.all([...workers].map((w) => w.stop()));
      await Promise.all([...planes].map((p) => p.stop()));
      await transport.close();
      stopLogging();
      await database.close();
    },
  };
  return runtime;
}

/**
 * In-process dispatches live in memory: after a restart, every SCHEDULED operation has lost its
 * message. Publishing them again (dedup and fencing make it harmless) brings them home in
 * seconds instead of after the reconciler floor.
 */
async function redispatchScheduled(store: OperationStore, transport: Transport, logger: Logger) {
  const scheduled = (await store.listActiveOlderThan(new Date(), 100_000)).filter(
    (o) => o.status === 'SCHEDULED',
  );
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
