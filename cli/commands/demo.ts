import { rmSync } from 'node:fs';
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { systemClock } from '../../machines/Clock.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import type { Pipeline, PipelineStage } from '../../machines/pipeline.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { selectRollbackOutcomes } from '../../persistence/reads/selectRollbackOutcomes.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import {
  registerSampleData,
  type SampleData,
  samplePipelineDefinition,
} from '../../stages/sampleData.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import { defineCommand, type Io, optionsOf, UsageError } from '../Command.ts';
import {
  openStatelyStream,
  requestedInspection,
  withInspectOptions,
} from '../statelyInspection.ts';
import { startDeletionDemo } from './demoDeletion.ts';
import { scriptDemoHandlers } from './demoHandlers.ts';
import { runOperatorSteps } from './demoOperatorSteps.ts';
import {
  describeCounts,
  reportLiveCopies,
  reportOperations,
  reportPackages,
  reportStatus,
  reportWarnings,
} from './demoOutcome.ts';
import { type DemoCast, type DemoRun, followOperations, runUntilStopped } from './demoPipeline.ts';

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
function createEmbeddedRuntime(
  dir: string,
  logger: ReturnType<typeof memoryLogger>,
  pipeline: Pipeline,
) {
  return createRuntime({
    embedded: true,
    dataDir: join(dir, 'data'),
    prefix: 'opstate_demo',
    timing: DEMO_TIMING,
    logger,
    // Its control plane runs the pipeline's pass while it leads: every stage after packaging.
    pipeline,
  });
}

const SUMMARY =
  'Run the declared pipeline embedded: a stage fails and is retried, a worker crashes; show how every operation got home';

/**
 * `opstate demo [--data-dir DIR]`: the declared pipeline (`samplePipelineDefinition`), embedded (a
 * private Postgres + the in-process transport), with two workers. No operation is submitted: each
 * package's files are declared complete, and the control plane's pass creates every stage. The
 * first transfer fails for good, an operator retries it, and worker-A is crashed part-way through
 * the archives; the operator then stages a package on request and rolls the transfer package back
 * to its transfer. Prints every
 * operation's path through the lifecycle, who created it and how it was recovered, and each
 * package's derived state; exit 0 when every operation COMPLETED, every package is ARCHIVED, the
 * rollback's re-run ran once per operation it redoes and no artifact has two live copies.
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
    const declared = samplePipelineDefinition();
    const runtime = await createEmbeddedRuntime(dir, logger, declared);
    out(`  ready after ${seconds(systemClock.now() - opened)}, migrations applied.`);
    try {
      inspection?.follow(runtime.database);
      return await pipeline({ runtime, declared, dir, keep, logger }, out);
    } finally {
      await inspection?.stop();
      await runtime.close();
    }
  } catch (err) {
    await inspection?.stop();
    throw err;
  }
}

/** Section 1: registers the sample's locations, packages, files and source copies, and shows the pipeline. */
async function registerDemoData(
  runtime: Runtime,
  pipeline: Pipeline,
  dir: string,
  out: (line?: string) => void,
): Promise<SampleData> {
  out();
  out('1. Registering locations, packages, files and their source copies; the declared pipeline');
  const sample = await registerSampleData(runtime.artifacts, join(dir, 'storage'));
  for (const l of Object.values(sample.locations)) {
    out(`  location ${l.name.padEnd(10)} (${l.locationType}) ${l.storageRoot}`);
  }
  const files = sample.packages.reduce((n, p) => n + p.fileCopyIds.length, 0);
  out(
    `  ${sample.packages.length} raw data packages (${sample.packages.map((p) => p.name).join(', ')}), ${files} raw data files with one source copy each,`,
  );
  out(`  1 data transfer package (${sample.dataTransferPackage.name})`);
  out(
    `  pipeline '${pipeline.name}' (defaultPipeline, one destination site), stages in run order:`,
  );
  for (const name of pipeline.order) {
    const stage = pipeline.stages[name] as PipelineStage;
    const where = stage.from === undefined ? `at ${stage.at}` : `${stage.from} → ${stage.at}`;
    const after =
      stage.after === undefined
        ? 'the entry stage: after its files are complete'
        : `after ${stage.after}`;
    out(`    ${name.padEnd(10)} ${stage.kind.padEnd(22)} ${where.padEnd(20)} ${after}`);
  }
  return sample;
}

/**
 * Section 2: starts the control plane (which runs the pipeline's pass while it leads), the
 * deletion demo and two workers serving every kind; worker-A's archive storage stalls after
 * writing the object, so it can be crashed there, and the first transfer to run, on either
 * worker, fails for good.
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
  const scripted = scriptDemoHandlers({
    failFirstOf: OperationKind.TRANSFER,
    afterUnpack: (outputs) => deletion.holdUnpacked(outputs),
  });
  const workerA = runtime.startWorker({
    kinds: OPERATION_KINDS,
    workerId: 'worker-A',
    handlers: scripted.wrap(
      createStageHandlers({
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
    ),
  });
  const workerB = runtime.startWorker({
    kinds: OPERATION_KINDS,
    workerId: 'worker-B',
    concurrency: 1,
    handlers: scripted.wrap(createStageHandlers({ storageRootOf, cipher })),
  });
  out(`  ${workerA.id}: its archive storage is slow to confirm writes`);
  out(`  ${workerB.id}: fast, one operation at a time`);
  out(
    `  the first ${OperationKind.TRANSFER} to run, on either worker, fails for good (a non-retryable error) until an operator fixes the cause`,
  );
  out(
    `  timers: heartbeat every ${DEMO_TIMING.heartbeatIntervalMs} ms, stale after ${DEMO_TIMING.heartbeatTimeoutMs} ms; reconciler floor ${DEMO_TIMING.reconcilerFloorMs} ms; broker ack-wait ${DEMO_TIMING.ackWaitMs} ms; pipeline pass every ${DEMO_TIMING.schedulerIntervalMs} ms`,
  );
  return {
    workerA,
    workerB,
    deletion,
    held: () => held,
    gone: () => gone.resolve(),
    failed: scripted.failed,
    fix: scripted.fix,
  };
}

/** What the demo runs in: the embedded runtime, the pipeline it runs, the data folder, the log. */
interface DemoSetting {
  readonly runtime: Runtime;
  readonly declared: Pipeline;
  readonly dir: string;
  readonly keep: boolean;
  readonly logger: ReturnType<typeof memoryLogger>;
}

async function pipeline(setting: DemoSetting, out: (line?: string) => void): Promise<number> {
  const { runtime, declared, dir, keep, logger } = setting;
  const sample = await registerDemoData(runtime, declared, dir, out);
  const locationName = new Map(Object.values(sample.locations).map((l) => [l.id, l.name]));
  const scene = { runtime, sample, locationName, out };
  const cast = await startDemoWorkers(runtime, dir, sample, out);
  const follow = followOperations(runtime, sample, cast, out);
  const run: DemoRun = { runtime, sample, cast, follow, out };
  const stopped = await runUntilStopped(run);
  // The operator's steps (demoOperatorSteps.ts, OPERATOR_STEPS) run in order; the summary lists each.
  const steps = stopped ? await runOperatorSteps(run) : [];
  let ok = stopped && steps.every((s) => s.ok);

  const viewsOf = () => Promise.all(follow.ids().map((id) => runtime.get(id)));
  await reportOperations(scene, await viewsOf());
  out();
  out('6. Packages, derived from their operations and copies (never stored)');
  const counts = await reportPackages(scene, 'each package, its state, and why it is there');
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
  const byPipeline = views.filter((v) => v.transitions[0]?.by === `pipeline:${declared.name}`);
  const retried = views.find((v) => v.id === cast.failed());
  const archived =
    counts.raw_data_package.ARCHIVED === sample.packages.length &&
    counts.data_transfer_package.ARCHIVED === 1;
  // The rollback happened, whole: every operation it redoes is superseded and has a re-run that
  // carries its id and COMPLETED (one per redone operation: nothing twice, nothing missing).
  const rollbacks = await selectRollbackOutcomes(runtime.database);
  const superseded = rollbacks.reduce((n, r) => n + r.superseded, 0);
  ok &&= views.every((v) => v.status === OperationStatus.COMPLETED);
  ok &&= OPERATION_KINDS.every((k) => kindsDone.has(k));
  ok &&= archived && retried?.status === OperationStatus.COMPLETED;
  ok &&=
    rollbacks.length === 1 &&
    rollbacks.every(
      (r) => r.superseded === r.redone && r.caused === r.redone && r.completed === r.caused,
    );
  out();
  out('Summary');
  out(
    `  operations: ${views.length}, ${superseded} of them superseded by a rollback; ${byPipeline.length} created by the pipeline's pass, ${views.length - byPipeline.length} submitted (the staging on request and the rollback's transfer, by the operator)`,
  );
  for (const r of rollbacks) {
    out(
      `  rollback ${r.id} to '${r.stage}' by ${r.by}: ${r.superseded} operations superseded, ${r.caused} created again carrying its id, ${r.completed} COMPLETED`,
    );
  }
  out(`  packages per derived state: ${describeCounts(counts)}`);
  out("  the operator's steps:");
  for (const [i, s] of steps.entries()) {
    out(`    ${String.fromCharCode(97 + i)}) ${s.title}: ${s.ok ? '' : 'NOT DONE: '}${s.summary}`);
  }
  out();
  out(
    ok
      ? `OK: all ${views.length} operations COMPLETED, every kind ran, every package ARCHIVED, the failed stage resumed after its retry, the rollback's re-run ran once per redone operation, no artifact has two live copies, every buffer copy was deleted after its verified archive with a receipt.`
      : "NOT OK: some operation did not complete, a package is not ARCHIVED, the rollback's re-run is not whole, an artifact has two live copies, or a buffer deletion did not finish (see above).",
  );
  if (keep) {
    out(`Data kept in ${dir}: storage/ holds the files; to look again:`);
    out(`  OPSTATE_DATA_DIR=${join(dir, 'data')} node bin/opstate.js status`);
  }
  return ok ? 0 : 1;
}
