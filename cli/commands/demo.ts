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
import { type LogLevel, memoryLogger } from '../../observe/Logger.ts';
import type { PhysicalCopyRecord } from '../../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import type { OperationInspection } from '../../persistence/inspectOperation.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import { defineCommand, type Io, optionsOf, UsageError } from '../Command.ts';
import {
  openStatelyStream,
  requestedInspection,
  withInspectOptions,
} from '../statelyInspection.ts';
import { startDeletionDemo } from './demoDeletion.ts';
import { describePath, recoveryOf, stepsOf } from './demoReport.ts';
import { createStatusCommand } from './status.ts';

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

async function pipeline(
  runtime: Runtime,
  dir: string,
  keep: boolean,
  logger: ReturnType<typeof memoryLogger>,
  out: (line?: string) => void,
): Promise<number> {
  out();
  out('1. Registering locations, packages, files and their source copies');
  const sample = await registerSampleData(runtime.artifacts, join(dir, 'storage'));
  const locationName = new Map(Object.values(sample.locations).map((l) => [l.id, l.name]));
  for (const l of Object.values(sample.locations)) {
    out(`  location ${l.name.padEnd(10)} (${l.locationType}) ${l.storageRoot}`);
  }
  const files = sample.packages.reduce((n, p) => n + p.fileCopyIds.length, 0);
  out(
    `  ${sample.packages.length} raw data packages (${sample.packages.map((p) => p.name).join(', ')}), ${files} raw data files with one source copy each,`,
  );
  out(`  1 data transfer package (${sample.dataTransferPackage.name})`);

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
      database: runtime.database,
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
    handlers: createStageHandlers({ storageRootOf, database: runtime.database, cipher }),
  });
  out(`  ${workerA.id}: its archive storage is slow to confirm writes`);
  out(`  ${workerB.id}: fast, one operation at a time`);
  out(
    `  timers: heartbeat every ${DEMO_TIMING.heartbeatIntervalMs} ms, stale after ${DEMO_TIMING.heartbeatTimeoutMs} ms; reconciler floor ${DEMO_TIMING.reconcilerFloorMs} ms; broker ack-wait ${DEMO_TIMING.ackWaitMs} ms`,
  );

  out();
  out('3. Running the pipeline, one stage after the other');
  const deadline = systemClock.now() + DEADLINE_MS;
  const ids: string[] = [];
  let crashed = false;
  const viewsOf = async (stageIds: string[]) => Promise.all(stageIds.map((id) => runtime.get(id)));
  const outputsOf = (views: OperationInspection[]) => views.flatMap((v) => [...v.outputs]);

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
      const onA = statuses.find(
        (s) =>
          s.id === held && s.status === OperationStatus.IN_PROGRESS && s.workerId === workerA.id,
      );
      if (!crashed && onA !== undefined) {
        crashed = true;
        out(
          `  ! ${onA.kind} ${shortId(onA.id)} is IN_PROGRESS on ${workerA.id}, which has written the archive object`,
        );
        out('    but not yet recorded the step. Crashing worker-A now: its heartbeats stop, it');
        out(
          '    writes nothing more, and its delivery stays unsettled, as a killed process would.',
        );
        const crashing = crash(workerA);
        gone.resolve();
        await crashing;
        out(`    ${workerB.id} carries on; the control plane has to notice on its own.`);
      }
      await systemClock.sleep(100);
    }
    const views = await viewsOf(stageIds);
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
    if (stage.kind === OperationKind.LONG_TERM_ARCHIVE) await deletion.beforeArchive();
    const views = await run({ title: `${stage.title} (${stage.kind}) x${inputs.length}`, inputs });
    if (views === undefined) {
      ok = false;
      out('  The pipeline stopped: a stage did not complete (see below).');
      break;
    }
    previous = outputsOf(views);
  }
  if (!crashed) out(`  (${workerA.id} never held an archive, so nothing was crashed this time.)`);

  out();
  out('4. What happened to each operation');
  const nameOf = (id: string | null | undefined) =>
    id == null ? '-' : (sample.artifacts.get(id)?.name ?? shortId(id));
  for (const view of await viewsOf(ids)) {
    const subject = nameOf(view.fields.rawDataPackageId ?? view.fields.dataTransferPackageId);
    out(
      `  ${view.kind.padEnd(22)} ${view.status.padEnd(9)} attempt ${view.attempt}  ${subject}  (operation ${shortId(view.id)})`,
    );
    describePath(view.transitions).forEach((line, i) => {
      out(`    ${i === 0 ? 'path     ' : '         '} ${line}`);
    });
    out(`    recovery  ${recoveryOf(view.transitions)}`);
    if (view.steps.length > 0) out(`    steps     ${stepsOf(view)}`);
    if (view.lastError !== null && view.status === OperationStatus.FAILED) {
      out(`    error     ${view.lastError.message}`);
    }
    for (const c of view.outputs) {
      const here = (await runtime.artifacts.copiesOf(c.artifactType, c.artifactId)).filter(
        (x) => x.locationId === c.locationId,
      );
      const live = here.filter((x) => x.status !== 'DELETED');
      // A buffer copy may already be gone: the deleter runs beside the pipeline (see 8.).
      const deleted = live.length === 0 && here.some((x) => x.status === 'DELETED');
      const mark =
        live.length > 1 ? '  <-- DUPLICATE' : live.length === 0 && !deleted ? '  <-- MISSING' : '';
      out(
        `    output    ${c.artifactType} ${nameOf(c.artifactId)} at ${locationName.get(c.locationId)}: ${deleted ? 'deleted after its verified archive' : `${live.length} live cop${live.length === 1 ? 'y' : 'ies'}`}${mark}`,
      );
    }
  }

  out();
  out('5. Live copies per artifact and location (the database allows one; checked anyway)');
  const perPlace = new Map<string, number>();
  for (const [id, a] of sample.artifacts) {
    for (const c of await runtime.artifacts.copiesOf(a.type, id)) {
      if (c.status === 'DELETED') continue;
      const key = `${a.type}|${id}|${c.locationId}`;
      perPlace.set(key, (perPlace.get(key) ?? 0) + 1);
    }
  }
  const duplicates = [...perPlace].filter(([, n]) => n > 1);
  const byGroup = new Map<string, { artifacts: number; most: number }>();
  for (const [key, n] of perPlace) {
    const [type, , loc] = key.split('|');
    const group = `${locationName.get(loc as string)}: ${type}`;
    const g = byGroup.get(group) ?? { artifacts: 0, most: 0 };
    byGroup.set(group, { artifacts: g.artifacts + 1, most: Math.max(g.most, n) });
  }
  for (const [group, g] of byGroup) {
    const each = g.most === 1 ? '1 live copy each' : `up to ${g.most} live copies`;
    out(`  ${group.padEnd(34)} ${g.artifacts} artifact(s), ${each}`);
  }
  if (duplicates.length === 0) {
    out(`  no artifact has more than one live copy at a location (${perPlace.size} checked)`);
  } else {
    ok = false;
    for (const [key, n] of duplicates)
      out(`  DUPLICATE: ${key.replaceAll('|', ' ')} has ${n} live copies`);
  }

  out();
  const notable = logger.lines.filter((l) => l.level === 'WARNING' || l.level === 'ERROR');
  out(`6. Runtime warnings (${notable.length}; the rest of the runtime's log is kept quiet)`);
  const grouped = new Map<
    string,
    { level: LogLevel; n: number; fields: Record<string, unknown> }
  >();
  for (const l of notable) {
    const key = `${l.level} ${l.message}`;
    const g = grouped.get(key);
    if (g === undefined) grouped.set(key, { level: l.level, n: 1, fields: l.fields });
    else g.n++;
  }
  for (const [key, g] of grouped) out(`  ${g.n} x ${key}  e.g. ${JSON.stringify(g.fields)}`);
  if (notable.length === 0) out('  none');

  out();
  out('7. Operation counts (as `opstate status` prints them)');
  const status = createStatusCommand(
    async () => ({ ...runtime.database, close: async () => {} }),
    async () => ({
      timing: runtime.timing,
      heartbeats: runtime.transport.heartbeats,
      close: async () => {},
    }),
  );
  await status.run([], { out: (l) => out(`  ${l}`), err: (l) => out(`  ${l}`) });

  const archives = (await viewsOf(ids))
    .filter((v) => v.kind === OperationKind.LONG_TERM_ARCHIVE)
    .map((v) => v.id);
  ok = (await deletion.report(archives)) && ok;

  const views = await viewsOf(ids);
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
