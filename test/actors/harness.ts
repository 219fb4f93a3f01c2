import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterEach } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { handlersModule, opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor as waitUntil } from '../helpers/waitFor.ts';
import { makeWorld, type World } from '../persistence/fixtures.ts';
import { uniquePrefix } from '../transport/helpers.ts';

let current: Deployment | undefined;

/** The last lines each child of the current deployment printed, for a failure message. */
function diagnostics(): string {
  if (current === undefined) return '';
  return current.children
    .map((c, i) => {
      const state = c.proc.exitCode ?? c.proc.signalCode ?? 'running';
      return `--- child ${i} (${c.proc.spawnargs.slice(2, 4).join(' ')}; ${state}):\n${c.output.slice(-15).join('\n')}`;
    })
    .join('\n');
}

/**
 * `waitFor` that, on a timeout, also reports what every child process of the current deployment
 * printed last.
 */
export function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
  intervalMs = 20,
): Promise<void> {
  return waitUntil(condition, what, timeoutMs, intervalMs, diagnostics);
}

export const NATS_URL = process.env.OPSTATE_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
/** The fixture handlers module the drills' workers load (compiled, importing `dist/`). */
export const HANDLERS = handlersModule(new URL('./fixtures/handlers.ts', import.meta.url));

/**
 * Small timers in the order the runtime demands; tests wait on conditions, never on these. The
 * heartbeat timeout is many intervals long so that a worker process starved of CPU on a busy
 * 2-core machine is not mistaken for a dead one.
 */
export const FAST_TIMING: Partial<RuntimeTiming> = {
  heartbeatIntervalMs: 250,
  heartbeatTimeoutMs: 4_000,
  reconcilerFloorMs: 8_000,
  ackWaitMs: 12_000,
  monitorIntervalMs: 250,
  reconcilerIntervalMs: 500,
  schedulerIntervalMs: 50,
  relayIntervalMs: 50,
  leaderPollMs: 250,
  leaderLeaseMs: 3_000,
  maxScheduled: 128,
  discoveryIntervalMs: 500,
};

/** A process started by a test, with everything it printed. */
export interface Child {
  readonly proc: ChildProcess;
  readonly output: string[];
  readonly exited: Promise<number | null>;
  printed(text: string): boolean;
}

/** One isolated deployment: its own database, NATS prefix, and a control plane in this process. */
export interface Deployment {
  readonly db: TestDatabase;
  readonly prefix: string;
  readonly timing: Partial<RuntimeTiming>;
  readonly runtime: Runtime;
  readonly logger: ReturnType<typeof memoryLogger>;
  readonly children: Child[];
  /** Starts `opstate <args>` as a child process of this deployment. */
  spawnCli(args: string[], env?: Record<string, string>): Child;
  /**
   * Starts a worker process with the fixture handlers, for every kind (or the kinds
   * `FIXTURE_KINDS` names, e.g. `long_term_archive`).
   */
  spawnWorker(env?: Record<string, string>, args?: string[]): Child;
  /** The same, resolved once the worker consumes (so no dispatch waits on its start-up). */
  readyWorker(env?: Record<string, string>, args?: string[]): Promise<Child>;
  close(): Promise<void>;
}

export async function startDeployment(
  timing: Partial<RuntimeTiming> = FAST_TIMING,
  options: {
    maxRetries?: number;
    /** A database of the drill's own (a private cluster): used as it is, never dropped. */
    databaseUrl?: string;
    /** A nats-server of the drill's own. */
    natsUrl?: string;
  } = {},
): Promise<Deployment> {
  const own = options.databaseUrl === undefined;
  const db: TestDatabase = own
    ? await createTestDatabase('opstate_actors', { migrated: true })
    : { name: 'private', url: options.databaseUrl as string };
  const natsUrl = options.natsUrl ?? NATS_URL;
  const prefix = uniquePrefix('act').replaceAll('.', '_');
  const logger = memoryLogger();
  const runtime = await createRuntime({
    databaseUrl: db.url,
    natsUrl,
    prefix,
    timing,
    logger,
    ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
  });
  const children: Child[] = [];
  const env = {
    ...process.env,
    DATABASE_URL: db.url,
    NATS_URL: natsUrl,
    OPSTATE_PREFIX: prefix,
    OPSTATE_TIMING: JSON.stringify(timing),
  };
  const spawnCli = (args: string[], extra: Record<string, string> = {}): Child => {
    const proc = spawn(process.execPath, opstateArgs(args), {
      cwd: REPO_ROOT,
      env: { ...env, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    const collect = (chunk: Buffer) => output.push(...chunk.toString().split('\n').filter(Boolean));
    proc.stdout?.on('data', collect);
    proc.stderr?.on('data', collect);
    const exited = new Promise<number | null>((resolve) =>
      proc.on('exit', (code) => resolve(code)),
    );
    const child: Child = {
      proc,
      output,
      exited,
      printed: (text) => output.some((l) => l.includes(text)),
    };
    children.push(child);
    return child;
  };
  const spawnWorker = (extra: Record<string, string> = {}, args: string[] = []) =>
    spawnCli(
      [
        'worker',
        '--kinds',
        extra.FIXTURE_KINDS ?? 'all',
        '--handlers',
        HANDLERS,
        '--id',
        `w-${randomUUID().slice(0, 6)}`,
        '--faults',
        ...args,
      ],
      extra,
    );
  const deployment: Deployment = {
    db,
    prefix,
    timing,
    runtime,
    logger,
    children,
    spawnCli,
    spawnWorker,
    async readyWorker(extra = {}, args = []) {
      const child = spawnWorker(extra, args);
      await waitFor(() => child.printed('started for'), 'the worker process to start', 60_000);
      return child;
    },
    async close() {
      for (const c of children)
        if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
      await Promise.all(children.map((c) => c.exited));
      await (runtime.transport as JetStreamTransport).destroy().catch(() => undefined);
      await runtime.close();
      if (own) await dropTestDatabase(db);
      if (current === deployment) current = undefined;
    },
  };
  current = deployment;
  return deployment;
}

/**
 * For a test file whose tests each start their own deployment: registers an `afterEach` that
 * closes every deployment the test started (its children killed, its own database dropped),
 * passed or failed, and returns the function that starts one. Call it once, at module level.
 * A child a drill left frozen (SIGSTOP) needs no waking first: SIGKILL ends a stopped process.
 *
 * @example
 * ```ts
 * const deploy = deploymentPerTest();
 * it('recovers', async () => {
 *   const dep = await deploy({ ...FAST_TIMING, ackWaitMs: 20_000 });
 * });
 * ```
 */
export function deploymentPerTest(): typeof startDeployment {
  const started: Deployment[] = [];
  afterEach(async () => {
    for (const dep of started.splice(0).reverse()) await dep.close();
  });
  return async (...args) => {
    const dep = await startDeployment(...args);
    started.push(dep);
    return dep;
  };
}

/** Kills a child with SIGKILL and waits for it to be gone. */
export async function kill9(child: Child): Promise<void> {
  child.proc.kill('SIGKILL');
  await waitFor(
    () => child.proc.exitCode !== null || child.proc.signalCode !== null,
    'the killed process to exit',
    30_000,
  );
  await child.exited;
}

/**
 * Submits a long-term-archive operation of a fresh package (locations from `makeWorld`), and
 * returns what a drill checks: the operation, the package and the archive location.
 */
export async function archiveOperation(
  dep: Pick<Deployment, 'runtime'>,
  maxRetries?: number,
  options: {
    readonly deadlineMs?: number;
    readonly priority?: number;
    readonly world?: World;
  } = {},
) {
  const { world, ...rest } = options;
  const w = world ?? (await makeWorld(dep.runtime.database));
  const { pkg, sourceCopy } = await newPackage(dep.runtime, { source: w.source.id });
  const id = await dep.runtime.submit({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: pkg,
      sourceLocationId: w.source.id,
      destinationLocationId: w.archive.id,
    },
    inputs: [sourceCopy],
    ...(maxRetries === undefined ? {} : { maxRetries }),
    ...rest,
  });
  return { id, pkg, archive: w.archive.id };
}

/** A fresh raw data package at the source with its copy; returns the ids an archive needs. */
export async function newPackage(runtime: Runtime, locations: { source: string }) {
  const pkg = await runtime.artifacts.addRawDataPackage({ name: `rdp-${randomUUID()}` });
  const { copy } = await runtime.artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg,
    locationId: locations.source,
  });
  return { pkg, sourceCopy: copy.id };
}
