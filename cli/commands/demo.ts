import { rmSync } from 'node:fs';
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { crash } from '../../loops/drill.ts';
import { systemClock } from '../../machines/Clock.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import { shortId } from '../../machines/shortId.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { PhysicalCopyRecord } from '../../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import type { OperationInspection } from '../../persistence/inspectOperation.ts';
import type { OperationRecord } from '../../persistence/OperationRecord.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData, type SampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import type { Worker } from '../../worker/Worker.ts';
import { defineCommand, type Io, optionsOf, UsageError } from '../Command.ts';
import {
  openStatelyStream,
  requestedInspection,
  withInspectOptions,
} from '../statelyInspection.ts';
import { startDeletionDemo } from './demoDeletion.ts';
import { reportLiveCopies, reportOperations, reportStatus, reportWarnings } from './demoOutcome.ts';

/** Small timers, in the order the runtime demands, so a crash is noticed within seconds. */
const DEMO_TIMING: Partial<RuntimeTiming> = {
  heartbeatIntervalMs: 200,
  heartbeatTimeoutMs: 1_500,
  reconcilerFloorMs: 4_000,
  ackWaitMs: 6_000,
  monitorIntervalMs: 250,
  reconcilerIntervalMs: 500,
  schedulerIntervalMs: 50,
  relayIntervalMs: 50,
  leaderPollMs: 250,
};

/** How long the pipeline may take before the demo gives up and reports what is stuck. */
const DEADLINE_MS = 120_000;

const TERMINAL = new Set<string>([OperationStatus.COMPLETED, OperationStatus.FAILED]);

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const aborted = (signal: AbortSignal) =>
  new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));

/**
 * The demo always runs embedded, even where `DATABASE_URL`/`NATS_URL` point at servers (it would
 * otherwise write its sample data there).
 */
function createEmbeddedRuntime(dir: string, logger: ReturnType<typeof memoryLogger>) {
  return createRuntime({
    embedded: true,
    dataDir: join(dir, 'data'),
    prefix: 'opstate_demo',
    timing: DEMO_TIMING,
    logger,
  });
}

interface Stage {
  readonly title: string;
  readonly inputs: CreateOperationInput[];
}

const SUMMARY =
  'Run the pipeline embedded, crash a worker part-way, show how every operation got home';

/**
 * `opstate demo [--data-dir DIR]`: the whole pipeline, embedded (a private Postgres + the in-process
 * transport), with two workers, one of which is crashed part-way. Prints every operation's path
 * through the lifecycle and how it was recovered; exit 0 when all COMPLETED with no duplicate
 * copy.
 *
 * @example
 * ```ts
 * process.exitCode = await demoCommand.run([], processIo);
 * ```
 */
export const demoCommand = defineCommand('demo', SUMMARY, (program, ctx) => {
  withInspectOptions(
    program
      .command('demo')
      .description(SUMMARY)
      .option(
        '--data-dir <dir>',
        'keep everything in this new or empty folder (default: a temporary one, removed at the end)',
      )
      .option('--inspect', "stream every operation's transitions, live, to the Stately inspector"),
  ).action(
    ctx.action(async (cmd) => {
      const o = optionsOf<{
        dataDir?: string;
        inspect?: boolean;
        inspectPort?: string;
        inspectUrl?: string;
      }>(cmd);
      const inspect = requestedInspection(o);
      const keep = o.dataDir !== undefined;
      const dir = keep
        ? resolve(o.dataDir as string)
        : await mkdtemp(join(tmpdir(), 'opstate-demo-'));
      if (keep && (await readdir(dir).catch(() => [])).length > 0) {
        throw new UsageError(`--data-dir ${dir} is not empty; give a new or empty folder`);
      }
      // The embedded Postgres server of a root process runs as another user, who must reach it.
      if (!keep) await chmod(dir, 0o711);
      // Ctrl-C while the database is being created should not leave a temporary one behind.
      const interrupted = () => {
        rmSync(dir, { recursive: true, force: true });
        process.exit(130);
      };
      if (!keep) process.once('SIGINT', interrupted);
      try {
        return await demo(dir, keep, ctx.io, inspect);
      } finally {
        process.off('SIGINT', interrupted);
        if (!keep) await rm(dir, { recursive: true, force: true });
      }
    }),
  );
});

async function demo(
  dir: string,
  keep: boolean,
  io: Io,
  inspect?: { 'inspect-port'?: string | undefined; 'inspect-url'?: string | undefined },
): Promise<number> {
  const out = (line = '') => io.out(line);
  out(
    'opstate demo: one pipeline, run embedded (a private Postgres server + in-process transport).',
  );
  out(`Data folder: ${dir}${keep ? ' (kept)' : ' (removed at the end; --data-dir DIR keeps it)'}`);
  if (process.env.DATABASE_URL || process.env.NATS_URL) {
    out('DATABASE_URL / NATS_URL are set, but the demo always runs embedded and ignores them.');
  }
  out();
  const logger = memoryLogger();
  // --inspect: every operation's transitions stream live to the Stately inspector.
  const inspection = inspect === undefined ? null : await openStatelyStream(inspect, io, logger);
  try {
    out('Opening the embedded database (creating it takes a few seconds; please wait)...');
    const opened = systemClock.now();
    const runtime = await createEmbeddedRuntime(dir, logger);
    out(`  ready after ${seconds(systemClock.now() - opened)}, migrations applied.`);
    try {
      inspection?.follow(runtime.database);
      return await pipeline(runtime, dir, keep, logger, out);
    } finally {
      await inspection?.stop();
      await runtime.close();
    }
  } catch (err) {
    await inspection?.stop();
    throw err;
  }
}

/** Section 1: registers the sample's locations, packages, files and source copies. */
async function registerDemoData(
  runtime: Runtime,
  dir: string,
  out: (line?: string) => void,
): Promise<SampleData> {
  out();
  out('1. Registering locations, packages, files and their source copies');
  const sample = await registerSampleData(runtime.artifacts, join(dir, 'storage'));
  for (const l of Object.values(sample.locations)) {
    out(`  location ${l.name.padEnd(10)} (${l.locationType}) ${l.storageRoot}`);
  }
  const files = sample.packages.reduce((n, p) => n + p.fileCopyIds.length, 0);
  out(
    `  ${sample.packages.length} raw data packages (${sample.packages.map((p) => p.name).join(', ')}), ${files} raw data files with one source copy each,`,
  );
  out(`  1 data transfer package (${sample.dataTransferPackage.name})`);
  return sample;
}

/** The demo's two workers, the deleters beside them, and worker-A's crash. */
interface DemoCast {
  readonly workerA: Worker;
  readonly workerB: Worker;
  readonly deletion: Awaited<ReturnType<typeof startDeletionDemo>>;
  /** The operation worker-A has written the archive object of and is stalled on, once it has. */
  held(): string | undefined;
  /** Lets worker-A's stalled handler end once it is crashed. */
  gone(): void;
}

/**
 * Section 2: starts the control plane, the deletion demo and two workers serving every kind;
 * worker-A's archive storage stalls after writing the object, so it can be crashed there.
 */
async function startDemoWorkers(
  runtime: Runtime,
  dir: string,
  sample: SampleData,
  out: (line?: string) => void,
): Promise<DemoCast> {
  out();
  out('2. Starting the control plane and two workers, each serving every kind');
  const roots = new Map(Object.values(sample.locations).map((l) => [l.id, l.storageRoot]));
  const storageRootOf = (id: string) => {
    const root = roots.get(id);
    if (root === undefined) throw new OpstateError(OpstateErrorCode.BAD_INPUT, `no location ${id}`);
    return root;
  };
  const reached = deferred<string>();
  let held: string | undefined;
  void reached.promise.then((id) => {
    held = id;
  });
  const gone = deferred<void>();
  runtime.startControlPlane();
  const deletion = await startDeletionDemo(runtime, dir, sample, out);
  const { cipher } = deletion;
  const workerA = runtime.startWorker({
    kinds: OPERATION_KINDS,
    workerId: 'worker-A',
    handlers: createStageHandlers({
      storageRootOf,
      cipher,
      faults: {
        // worker-A's archive storage is slow to confirm a write: the object is on disk, the
        // journal step not yet recorded, when the worker dies.
        async afterStore(ctx: HandlerContext) {
          reached.resolve(ctx.operation.id);
          await Promise.race([gone.promise, aborted(ctx.signal)]);
          throw new Error('worker-A is gone');
        },
      },
    }),
  });
  const workerB = runtime.startWorker({
    kinds: OPERATION_KINDS,
    workerId: 'worker-B',
    concurrency: 1,
    handlers: createStageHandlers({ storageRootOf, cipher }),
  });
  out(`  ${workerA.id}: its archive storage is slow to confirm writes`);
  out(`  ${workerB.id}: fast, one operation at a time`);
  out(
    `  timers: heartbeat every ${DEMO_TIMING.heartbeatIntervalMs} ms, stale after ${DEMO_TIMING.heartbeatTimeoutMs} ms; reconciler floor ${DEMO_TIMING.reconcilerFloorMs} ms; broker ack-wait ${DEMO_TIMING.ackWaitMs} ms`,
  );
  return { workerA, workerB, deletion, held: () => held, gone: () => gone.resolve() };
}

/** Crashes worker-A once it holds, IN_PROGRESS, the operation it stalled on; true once crashed. */
async function crashWhenHeld(
  cast: DemoCast,
  statuses: readonly OperationRecord[],
  out: (line?: string) => void,
): Promise<boolean> {
  const { workerA, workerB } = cast;
  const onA = statuses.find(
    (s) =>
      s.id === cast.held() && s.status === OperationStatus.IN_PROGRESS && s.workerId === workerA.id,
  );
  if (onA === undefined) return false;
  out(
    `  ! ${onA.kind} ${shortId(onA.id)} is IN_PROGRESS on ${workerA.id}, which has written the archive object`,
  );
  out('    but not yet recorded the step. Crashing worker-A now: its heartbeats stop, it');
  out('    writes nothing more, and its delivery stays unsettled, as a killed process would.');
  const crashing = crash(workerA);
  cast.gone();
  await crashing;
  out(`    ${workerB.id} carries on; the control plane has to notice on its own.`);
  return true;
}

/**
 * Section 3: each stage of the sample pipeline as one batch, waited on until every operation is
 * COMPLETED or FAILED (crashing worker-A on the way); the ids of every operation submitted and
 * whether every stage completed.
 */
async function runStages(
  runtime: Runtime,
  sample: SampleData,
  cast: DemoCast,
  out: (line?: string) => void,
): Promise<{ ids: string[]; ok: boolean }> {
  out();
  out('3. Running the pipeline, one stage after the other');
  const deadline = systemClock.now() + DEADLINE_MS;
  const ids: string[] = [];
  let crashed = false;

  const run = async (stage: Stage): Promise<OperationInspection[] | undefined> => {
    const started = systemClock.now();
    // One batch per stage: the scheduler claims it in one pass and the relay publishes it at once.
    const stageIds = await runtime.submitMany(stage.inputs);
    ids.push(...stageIds);
    for (;;) {
      const statuses = await Promise.all(stageIds.map((id) => runtime.store.load(id)));
      if (statuses.every((s) => TERMINAL.has(s.status))) break;
      if (systemClock.now() > deadline) {
        out(`  ${stage.title}: still not finished after ${seconds(DEADLINE_MS)}; giving up`);
        return undefined;
      }
      if (!crashed) crashed = await crashWhenHeld(cast, statuses, out);
      await systemClock.sleep(100);
    }
    const views = await Promise.all(stageIds.map((id) => runtime.get(id)));
    const counts = [...new Set(views.map((v) => v.status))].map(
      (s) => `${views.filter((v) => v.status === s).length} ${s}`,
    );
    out(`  ${stage.title}: ${counts.join(', ')} (${seconds(systemClock.now() - started)})`);
    return views.every((v) => v.status === OperationStatus.COMPLETED) ? views : undefined;
  };

  let ok = true;
  let previous: PhysicalCopyRecord[] = [];
  for (const stage of SAMPLE_PIPELINE) {
    const inputs = stage.inputs(sample, previous).map((i) => ({ ...i, by: 'demo' }));
    if (stage.kind === OperationKind.LONG_TERM_ARCHIVE) await cast.deletion.beforeArchive();
    const views = await run({ title: `${stage.title} (${stage.kind}) x${inputs.length}`, inputs });
    if (views === undefined) {
      ok = false;
      out('  The pipeline stopped: a stage did not complete (see below).');
      break;
    }
    previous = views.flatMap((v) => [...v.outputs]);
  }
  if (!crashed) {
    out(`  (${cast.workerA.id} never held an archive, so nothing was crashed this time.)`);
  }
  return { ids, ok };
}

async function pipeline(
  runtime: Runtime,
  dir: string,
  keep: boolean,
  logger: ReturnType<typeof memoryLogger>,
  out: (line?: string) => void,
): Promise<number> {
  const sample = await registerDemoData(runtime, dir, out);
  const locationName = new Map(Object.values(sample.locations).map((l) => [l.id, l.name]));
  const scene = { runtime, sample, locationName, out };
  const cast = await startDemoWorkers(runtime, dir, sample, out);
  const stages = await runStages(runtime, sample, cast, out);
  let ok = stages.ok;
  const viewsOf = () => Promise.all(stages.ids.map((id) => runtime.get(id)));
  await reportOperations(scene, await viewsOf());
  ok = (await reportLiveCopies(scene)) && ok;
  reportWarnings(logger, out);
  await reportStatus(runtime, out);

  const archives = (await viewsOf())
    .filter((v) => v.kind === OperationKind.LONG_TERM_ARCHIVE)
    .map((v) => v.id);
  ok = (await cast.deletion.report(archives)) && ok;

  const views = await viewsOf();
  const kindsDone = new Set(
    views.filter((v) => v.status === OperationStatus.COMPLETED).map((v) => v.kind),
  );
  ok &&= views.every((v) => v.status === OperationStatus.COMPLETED);
  ok &&= OPERATION_KINDS.every((k) => kindsDone.has(k));
  out();
  out(
    ok
      ? `OK: all ${views.length} operations COMPLETED, every kind ran, no artifact has two live copies, every buffer copy was deleted after its verified archive with a receipt.`
      : 'NOT OK: some operation did not complete, an artifact has two live copies, or a buffer deletion did not finish (see above).',
  );
  if (keep) {
    out(`Data kept in ${dir}: storage/ holds the files; to look again:`);
    out(`  OPSTATE_DATA_DIR=${join(dir, 'data')} node bin/opstate.js status`);
  }
  return ok ? 0 : 1;
}
