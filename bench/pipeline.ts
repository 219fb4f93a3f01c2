/**
 * The default pipeline (one source, one destination) over many packages, on the real Postgres and
 * the real NATS JetStream, against the same operations submitted by a caller, in the same run.
 * Prints one JSON object per line: `{"name", "value", "unit"}`, with `"baseline"` and `"ratio"`
 * where a figure with the pipeline is compared with the same figure without it.
 *
 *   node --import tsx bench/pipeline.ts      # or: npm run bench -- pipeline
 *
 * The world, registered once in a template database and copied (`create database … template`)
 * for each run: OPSTATE_BENCH_PIPELINE_PACKAGES raw data packages (default 10,000) of one raw
 * data file each, with its copy at the source, in data transfer packages of
 * OPSTATE_BENCH_PIPELINE_PER_BUNDLE (default 10). Each run has a control plane, a worker of 32
 * slots serving every kind and a caller, each a runtime of its own in this process, every
 * statement each sends counted at its database object:
 * - `pipeline`: the control plane runs `defaultPipeline`; the caller submits the packagings, the
 *   leader's pass creates every later stage (bundling, transfer, unpack, long-term archive).
 * - `caller`: no pipeline; the caller submits the packagings, waits for the stage to finish, reads
 *   the copies it produced (one statement) and submits the next stage's operations with those
 *   copies as inputs, stage after stage: the same operations, with the same fields and inputs.
 * Handlers complete at once with the copies their kind must produce (no file is touched); the
 * long-term archive runs opstate's archive protocol on a stand-in package (`archiveStandIn`, a
 * local folder per run), as its output contract requires a VERIFIED archive record.
 *
 * Per run: its throughput (completions ÷ submit to last completion), each stage's throughput
 * (its completions ÷ first CREATE to last COMPLETE of the stage, from the transition history),
 * how long each stage's operations waited to be created once their input copies existed (median
 * and 95th percentile of CREATE after the producing COMPLETE: the chaining's delay),
 * and the cost of chaining: statements per completion (control plane, worker, caller, their sum),
 * commits and buffer accesses per completion (pg_stat_database of the run's database, read once
 * every connection to it is closed, the bench's own polls subtracted). The pipeline run's figures
 * carry the caller run's as their baseline. WAL bytes are not printed: pg_current_wal_lsn counts
 * the whole server, which other work shares. The bench's own polls of progress go over a
 * connection of their own, not counted as anyone's statements.
 *
 * OPSTATE_BENCH_PIPELINE_ROUNDS (default 1) runs both that many times, each round starting with
 * the one that went second in the round before.
 *
 * Env also: OPSTATE_BENCH_ADMIN_URL, NATS_URL (see lib/settings.ts).
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { OPERATION_KINDS, OperationKind } from '../machines/OperationKind.ts';
import { defaultPipeline } from '../machines/pipeline.ts';
import { LocationType } from '../machines/routing.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { DEFAULT_DATABASE_SCHEMA } from '../persistence/databaseSchema.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../runtime/Runtime.ts';
import { archiveStandIn } from '../stages/archiveStandIn.ts';
import { archiveStoreAt } from '../stages/registerArchiveStore.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { benchDatabases, benchLog } from './lib/benchDatabases.ts';
import { print } from './lib/figure.ts';
import { envNumber, NATS_URL } from './lib/settings.ts';
import { instrument, newCounter, type StatementCounter } from './lib/statementCounter.ts';

const PACKAGES = envNumber('OPSTATE_BENCH_PIPELINE_PACKAGES', 10_000);
const PER_BUNDLE = envNumber('OPSTATE_BENCH_PIPELINE_PER_BUNDLE', 10);
const ROUNDS = envNumber('OPSTATE_BENCH_PIPELINE_ROUNDS', 1);
const BUNDLES = Math.ceil(PACKAGES / PER_BUNDLE);
/** Packaging and archive per package; bundling, transfer and unpack per bundle. */
const OPERATIONS = 2 * PACKAGES + 3 * BUNDLES;
const CONCURRENCY = 32;
const CHUNK = 1000;
const SITE = 'bench';
const RUN = `${process.pid}_${randomBytes(3).toString('hex')}`;
const DONE_TIMEOUT_MS = 1_800_000;
const IDLE_MS = 1_000;

/** Control-plane loops tuned for throughput, as the e2e and scheduler benches tune them. */
const TIMING: Partial<RuntimeTiming> = {
  schedulerIntervalMs: 10,
  relayIntervalMs: 10,
  leaderPollMs: 250,
};

/** The stages of the default pipeline with one destination, in order, by the kind each creates. */
const STAGES = [
  { stage: 'packaging', kind: OperationKind.RAW_DATA_PACKAGE },
  { stage: 'bundling', kind: OperationKind.DATA_TRANSFER_PACKAGE },
  { stage: 'transfer-1', kind: OperationKind.TRANSFER },
  { stage: 'unpack-1', kind: OperationKind.UNPACK },
  { stage: 'archive-1', kind: OperationKind.LONG_TERM_ARCHIVE },
] as const;

const { quietLogger, say } = benchLog('pipeline');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const databases = benchDatabases();
const { admin } = databases;
const createDatabase = databases.create;

/** What the template holds, as the caller knows it (it registered them). */
interface World {
  readonly source: string;
  readonly buffer: string;
  readonly archive: string;
  readonly bundles: readonly string[];
  readonly packages: readonly { id: string; bundle: string; fileCopy: string }[];
}

/** Registers the locations, packages, files and the files' source copies in the template. */
async function fillTemplate(): Promise<{ template: string; world: World }> {
  const template = `opstate_bench_pipe_${RUN}_world`;
  const runtime = await createRuntime({
    databaseUrl: await createDatabase(template),
    logger: quietLogger,
  });
  try {
    const a = runtime.artifacts;
    const location = (name: string, locationType: LocationType) =>
      a.addLocation({ site: SITE, name, locationType, storageRoot: `/bench/${name}` });
    const source = (await location('source', LocationType.SOURCE)).id;
    const buffer = (await location('buffer', LocationType.BUFFER)).id;
    const archive = (await location('archive', LocationType.LONG_TERM_ARCHIVE)).id;
    const bundles: string[] = [];
    for (let b = 0; b < BUNDLES; b++) {
      bundles.push(await a.addDataTransferPackage({ name: `dtp-${b}` }));
    }
    const started = performance.now();
    const packages: { id: string; bundle: string; fileCopy: string }[] = [];
    for (let from = 0; from < PACKAGES; from += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, PACKAGES - from) }, async (_, i) => {
          const p = from + i;
          const bundle = bundles[Math.floor(p / PER_BUNDLE)] as string;
          const id = await a.addRawDataPackage({ name: `rdp-${p}`, dataTransferPackageId: bundle });
          const checksum = `sha256:${p.toString(16).padStart(64, '0')}`;
          const file = await a.addRawDataFile({
            name: 'scan.fits',
            rawDataPackageId: id,
            checksum,
            size: 1024,
          });
          const { copy } = await a.addCopy({
            artifactType: ArtifactType.RAW_DATA_FILE,
            artifactId: file,
            locationId: source,
            path: `/bench/source/rdp-${p}/scan.fits`,
            checksum,
            size: 1024,
          });
          return { id, bundle, fileCopy: copy.id };
        }),
      );
      packages.push(...batch);
    }
    await runtime.database.execute('vacuum analyze');
    say(
      `${PACKAGES} packages in ${BUNDLES} transfer packages registered in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    return { template, world: { source, buffer, archive, bundles, packages } };
  } finally {
    await runtime.close();
  }
}

type Arm = 'pipeline' | 'caller';

/** What one run measured. */
interface RunFigures {
  readonly arm: Arm;
  readonly seconds: number;
  readonly completions: number;
  readonly statements: Record<'plane' | 'worker' | 'caller', number>;
  /** The control plane's statements per second before the first submission. */
  readonly idle: number;
  readonly commits: number;
  readonly buffers: number;
  readonly stages: readonly {
    stage: string;
    kind: string;
    completions: number;
    rate: number;
    /** Milliseconds from the inputs' last producing COMPLETE to this stage's CREATE (null: packaging). */
    delayP50: number | null;
    delayP95: number | null;
  }[];
}

/** The handlers: every kind completes at once with its required copies; archives run the protocol. */
function handlersFor(storeRoot: string): Record<OperationKind, OperationHandler> {
  const store = archiveStoreAt(storeRoot);
  const noop: OperationHandler = async (ctx) => ({ outputs: await ctx.requiredOutputs() });
  return Object.fromEntries(
    OPERATION_KINDS.map((k) => [
      k,
      k === OperationKind.LONG_TERM_ARCHIVE
        ? (ctx: Parameters<OperationHandler>[0]) => archiveStandIn(ctx, store)
        : noop,
    ]),
  ) as Record<OperationKind, OperationHandler>;
}

/** Submits `inputs` in chunks, as a caller with many operations does. */
async function submitAll(caller: Runtime, inputs: readonly CreateOperationInput[]): Promise<void> {
  for (let from = 0; from < inputs.length; from += CHUNK) {
    await caller.submitMany(inputs.slice(from, from + CHUNK));
  }
}

/** The caller's chaining: the copies of one artifact type at one location, in one statement. */
async function presentCopies(
  caller: Runtime,
  artifactType: ArtifactType,
  locationId: string,
): Promise<Map<string, string>> {
  const rows = await caller.database.execute<{ id: string; artifact_id: string }>(
    `select id::text, artifact_id::text from physical_copy
      where artifact_type = '${artifactType}' and location_id = '${locationId}' and status = 'PRESENT'`,
  );
  return new Map(rows.map((r) => [r.artifact_id, r.id]));
}

type Role = 'plane' | 'worker' | 'caller';

/** The bench's own connection to a run's database, counting its queries to subtract their commits. */
interface Probe {
  readonly sql: postgres.Sql;
  queries: number;
}

/** One run's database, runtimes, statement counters and probe, as `openRun` made them. */
interface Run {
  readonly arm: Arm;
  /** The run's database, a copy of the template. */
  readonly database: string;
  readonly prefix: string;
  /** Where the archive stand-in writes its packages. */
  readonly storeRoot: string;
  readonly plane: Runtime;
  readonly worker: Runtime;
  readonly caller: Runtime;
  readonly counters: Record<Role, StatementCounter>;
  readonly probe: Probe;
  /** Closes the three runtimes, once however often it is called. */
  readonly closeRuntimes: () => Promise<void>;
}

/**
 * One run of `arm` on a fresh copy of the template: serve every kind, submit the packagings, wait
 * for the last archive (chaining the stages by the caller in the `caller` arm), then measure.
 */
async function runArm(
  arm: Arm,
  template: string,
  world: World,
  round: number,
): Promise<RunFigures> {
  const run = await openRun(arm, template, round);
  try {
    await startServing(run);
    const idle = await idleStatementsPerSecond(run.counters.plane);
    const from = statementsOf(run.counters);
    const before = await databaseStats(run.database);
    const probesBefore = run.probe.queries;
    const started = performance.now();
    await submitAll(run.caller, packagingsOf(world));
    if (arm === 'pipeline') {
      await waitStage(run, OperationKind.LONG_TERM_ARCHIVE, PACKAGES);
    } else {
      await chainByCaller(run, world);
    }
    const seconds = (performance.now() - started) / 1000;
    const statements = statementsSince(run.counters, from);
    const ownPolls = run.probe.queries - probesBefore;
    await expectEveryOperationCompleted(run);
    const stages = await stageFigures(run);
    const after = await statsOnceClosed(run);
    return {
      arm,
      seconds,
      completions: OPERATIONS,
      statements,
      idle,
      commits: after.xacts - before.xacts - ownPolls,
      buffers: after.buffers - before.buffers,
      stages,
    };
  } finally {
    await tearDown(run);
  }
}

/**
 * Copies the template into the run's database and opens on it a control plane (running the
 * default pipeline in the `pipeline` arm), a worker and a caller, each counted, and the probe.
 */
async function openRun(arm: Arm, template: string, round: number): Promise<Run> {
  const database = `opstate_bench_pipe_${RUN}_${arm}_${round}`;
  const url = await createDatabase(database, template);
  const prefix = `bpipe_${RUN}_${arm}_${round}`;
  const storeRoot = join(tmpdir(), `opstate-bench-pipeline-${RUN}-${arm}-${round}`);
  const pipeline = defaultPipeline({
    source: { site: SITE, name: 'source' },
    destinations: [
      { buffer: { site: SITE, name: 'buffer' }, archive: { site: SITE, name: 'archive' } },
    ],
  });
  const open = (withPipeline: boolean) =>
    createRuntime({
      databaseUrl: url,
      natsUrl: NATS_URL,
      prefix,
      timing: TIMING,
      logger: quietLogger,
      ...(withPipeline ? { pipeline } : {}),
    });
  const plane = await open(arm === 'pipeline');
  const worker = await open(false);
  const caller = await open(false);
  const counters: Record<Role, StatementCounter> = {
    plane: newCounter(),
    worker: newCounter(),
    caller: newCounter(),
  };
  instrument(plane.database, counters.plane);
  instrument(worker.database, counters.worker);
  instrument(caller.database, counters.caller);
  // The bench's own polls: a connection of their own, counted only to subtract their commits.
  const probe: Probe = {
    sql: postgres(url, {
      max: 1,
      onnotice: () => {},
      connection: { search_path: DEFAULT_DATABASE_SCHEMA },
    }),
    queries: 0,
  };
  let closed = false;
  const closeRuntimes = async () => {
    if (closed) return;
    closed = true;
    await caller.close();
    await worker.close();
    await plane.close();
  };
  return {
    arm,
    database,
    prefix,
    storeRoot,
    plane,
    worker,
    caller,
    counters,
    probe,
    closeRuntimes,
  };
}

/** Starts the control plane, waits for it to lead, then starts the worker on every kind. */
async function startServing(run: Run): Promise<void> {
  const control = run.plane.startControlPlane();
  const until = Date.now() + 60_000;
  while (!control.isLeader) {
    if (Date.now() > until) throw new Error('control plane never became leader');
    await sleep(20);
  }
  run.worker.startWorker({
    kinds: [...OPERATION_KINDS],
    handlers: handlersFor(run.storeRoot),
    concurrency: CONCURRENCY,
  });
}

/** What the control plane sends with nothing to do, over a second before the first submission. */
async function idleStatementsPerSecond(plane: StatementCounter): Promise<number> {
  const idleFrom = plane.statements;
  await sleep(IDLE_MS);
  return ((plane.statements - idleFrom) * 1000) / IDLE_MS;
}

function statementsOf(counters: Record<Role, StatementCounter>): Record<Role, number> {
  return {
    plane: counters.plane.statements,
    worker: counters.worker.statements,
    caller: counters.caller.statements,
  };
}

function statementsSince(
  counters: Record<Role, StatementCounter>,
  from: Record<Role, number>,
): Record<Role, number> {
  const now = statementsOf(counters);
  return {
    plane: now.plane - from.plane,
    worker: now.worker - from.worker,
    caller: now.caller - from.caller,
  };
}

/** Commits and buffer accesses of one database so far (pg_stat_database, over the admin connection). */
async function databaseStats(database: string): Promise<{ xacts: number; buffers: number }> {
  const [row] = await admin.unsafe(
    `select (xact_commit + xact_rollback)::bigint as xacts, (blks_hit + blks_read)::bigint as blks
       from pg_stat_database where datname = $1`,
    [database],
  );
  return { xacts: Number(row?.xacts), buffers: Number(row?.blks) };
}

/** Closes the runtimes, then reads the database's counts, which each backend reported on exit. */
async function statsOnceClosed(run: Run): Promise<{ xacts: number; buffers: number }> {
  await run.closeRuntimes();
  await sleep(200);
  return databaseStats(run.database);
}

/** A query of the bench's own, over the probe and counted. */
function probeQuery(run: Run, query: string, parameters?: postgres.ParameterOrJSON<never>[]) {
  run.probe.queries++;
  return run.probe.sql.unsafe(query, parameters);
}

/** Waits until `n` operations of `kind` are COMPLETED. */
async function waitStage(run: Run, kind: OperationKind, n: number): Promise<void> {
  const completed = async () => {
    const [row] = await probeQuery(
      run,
      `select count(*)::int as n from operation where kind = $1 and status = 'COMPLETED'`,
      [kind],
    );
    return Number(row?.n);
  };
  const until = Date.now() + DONE_TIMEOUT_MS;
  while ((await completed()) < n) {
    if (Date.now() > until) throw new Error(`${run.arm}: timed out waiting for ${n} ${kind}`);
    await sleep(50);
  }
}

/** One packaging per package, of its file's source copy. */
function packagingsOf(world: World): CreateOperationInput[] {
  return world.packages.map((p) => ({
    kind: OperationKind.RAW_DATA_PACKAGE,
    fields: { rawDataPackageId: p.id, locationId: world.source },
    inputs: [p.fileCopy],
  }));
}

/** The caller chains the stages itself: each waits for the one before, then reads its copies. */
async function chainByCaller(run: Run, world: World): Promise<void> {
  const { caller } = run;
  await waitStage(run, OperationKind.RAW_DATA_PACKAGE, PACKAGES);
  const packaged = await presentCopies(caller, ArtifactType.RAW_DATA_PACKAGE, world.source);
  await submitAll(caller, bundlingsOf(world, packaged));
  await waitStage(run, OperationKind.DATA_TRANSFER_PACKAGE, BUNDLES);
  const bundled = await presentCopies(caller, ArtifactType.DATA_TRANSFER_PACKAGE, world.source);
  await submitAll(caller, transfersOf(world, bundled));
  await waitStage(run, OperationKind.TRANSFER, BUNDLES);
  const moved = await presentCopies(caller, ArtifactType.DATA_TRANSFER_PACKAGE, world.buffer);
  await submitAll(caller, unpacksOf(world, moved));
  await waitStage(run, OperationKind.UNPACK, BUNDLES);
  const unpacked = await presentCopies(caller, ArtifactType.RAW_DATA_PACKAGE, world.buffer);
  await submitAll(caller, archivesOf(world, unpacked));
  await waitStage(run, OperationKind.LONG_TERM_ARCHIVE, PACKAGES);
}

/** One bundling per transfer package, of its members' packaged copies (by package id). */
function bundlingsOf(world: World, packaged: Map<string, string>): CreateOperationInput[] {
  const members = new Map<string, string[]>();
  for (const p of world.packages) {
    members.set(p.bundle, [...(members.get(p.bundle) ?? []), packaged.get(p.id) as string]);
  }
  return world.bundles.map((b) => ({
    kind: OperationKind.DATA_TRANSFER_PACKAGE,
    fields: { dataTransferPackageId: b, locationId: world.source },
    inputs: members.get(b) ?? [],
  }));
}

/** One transfer per transfer package, source to buffer, of its bundled copy (by bundle id). */
function transfersOf(world: World, bundled: Map<string, string>): CreateOperationInput[] {
  return world.bundles.map((b) => ({
    kind: OperationKind.TRANSFER,
    fields: {
      dataTransferPackageId: b,
      sourceLocationId: world.source,
      destinationLocationId: world.buffer,
    },
    inputs: [bundled.get(b) as string],
  }));
}

/** One unpack per transfer package at the buffer, of its moved copy (by bundle id). */
function unpacksOf(world: World, moved: Map<string, string>): CreateOperationInput[] {
  return world.bundles.map((b) => ({
    kind: OperationKind.UNPACK,
    fields: { dataTransferPackageId: b, locationId: world.buffer },
    inputs: [moved.get(b) as string],
  }));
}

/** One long-term archive per package, buffer to archive, of its unpacked copy (by package id). */
function archivesOf(world: World, unpacked: Map<string, string>): CreateOperationInput[] {
  return world.packages.map((p) => ({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: p.id,
      sourceLocationId: world.buffer,
      destinationLocationId: world.archive,
    },
    inputs: [unpacked.get(p.id) as string],
  }));
}

/** Throws unless the run holds exactly the expected operations, every one COMPLETED. */
async function expectEveryOperationCompleted(run: Run): Promise<void> {
  const [totals] = await probeQuery(
    run,
    `select count(*)::int as n, count(*) filter (where status = 'COMPLETED')::int as done
       from operation`,
  );
  if (Number(totals?.n) !== OPERATIONS || Number(totals?.done) !== OPERATIONS) {
    throw new Error(
      `${run.arm}: ${totals?.done} of ${totals?.n} operations COMPLETED, ${OPERATIONS} expected`,
    );
  }
}

/** Each stage's completions, throughput and creation delay, from the transition history. */
async function stageFigures(run: Run): Promise<RunFigures['stages']> {
  const stageRows = await probeQuery(
    run,
    `select o.kind, count(*) filter (where t.event = 'COMPLETE')::int as n,
       extract(epoch from max(t.at) filter (where t.event = 'COMPLETE')
                        - min(t.at) filter (where t.event = 'CREATE'))::float8 as span
     from operation_transition t join operation o on o.id = t.operation_id
     group by o.kind`,
  );
  const byKind = new Map(stageRows.map((r) => [String(r.kind), r]));
  const delays = await creationDelays(run);
  return STAGES.map(({ stage, kind }) => {
    const r = byKind.get(kind);
    const n = Number(r?.n);
    const d = delays.get(kind);
    return {
      stage,
      kind,
      completions: n,
      rate: n / Math.max(0.001, Number(r?.span)),
      delayP50: d === undefined ? null : Number(d.p50),
      delayP95: d === undefined ? null : Number(d.p95),
    };
  });
}

/**
 * How long each operation after packaging waited to be created once its inputs existed: its
 * CREATE after the last COMPLETE of the operations that produced its input copies, by kind
 * (median and 95th percentile, milliseconds).
 */
async function creationDelays(run: Run): Promise<Map<string, postgres.Row>> {
  const delayRows = await probeQuery(
    run,
    `with d as (
       select o.kind, o.id,
         extract(epoch from min(c.at) - max(p.at))::float8 * 1000 as ms
       from operation o
       join operation_transition c on c.operation_id = o.id and c.event = 'CREATE'
       join operation_input i on i.operation_id = o.id
       join operation_output oo on oo.physical_copy_id = i.physical_copy_id
       join operation_transition p on p.operation_id = oo.operation_id and p.event = 'COMPLETE'
       where o.kind <> 'raw_data_package'
       group by o.kind, o.id)
     select kind, percentile_cont(0.5) within group (order by ms)::float8 as p50,
       percentile_cont(0.95) within group (order by ms)::float8 as p95
     from d group by kind`,
  );
  return new Map(delayRows.map((r) => [String(r.kind), r]));
}

/** Closes everything the run opened and removes its database, archive store and NATS streams. */
async function tearDown(run: Run): Promise<void> {
  await run.closeRuntimes();
  await run.probe.sql.end();
  await admin.unsafe(`drop database if exists "${run.database}" with (force)`);
  await rm(run.storeRoot, { recursive: true, force: true });
  const nats = await createJetStreamTransport({
    insecureNats: true,
    servers: NATS_URL,
    prefix: run.prefix,
  }).catch(() => undefined);
  await nats?.destroy().catch(() => undefined);
}

const per = (x: number) => x / OPERATIONS;
const common = {
  packages: PACKAGES,
  per_bundle: PER_BUNDLE,
  operations: OPERATIONS,
  concurrency: CONCURRENCY,
  scheduler_interval_ms: TIMING.schedulerIntervalMs,
};

function printRound(p: RunFigures, c: RunFigures, round: number): void {
  print({
    name: 'pipeline_throughput',
    value: p.completions / p.seconds,
    unit: 'completions/s',
    baseline: c.completions / c.seconds,
    round,
    ...common,
    note: 'every operation of the run ÷ first submission to the last archive completed; baseline: the same operations, each stage submitted by a caller once the stage before finished (a barrier per stage), same run',
  });
  for (const [i, s] of p.stages.entries()) {
    const b = c.stages[i] as RunFigures['stages'][number];
    print({
      name: 'pipeline_stage_throughput',
      value: s.rate,
      unit: 'completions/s',
      baseline: b.rate,
      stage: s.stage,
      kind: s.kind,
      completions: s.completions,
      round,
      ...common,
      note: 'the stage’s completions ÷ its first CREATE to its last COMPLETE (transition history); with the pipeline the stages overlap, so a stage after packaging runs at the pace its inputs arrive; by the caller they follow each other',
    });
    if (s.delayP50 !== null && b.delayP50 !== null) {
      print({
        name: 'pipeline_stage_created_after_ms',
        value: s.delayP50,
        unit: 'ms (median)',
        baseline: b.delayP50,
        p95: Math.round(s.delayP95 ?? 0),
        baseline_p95: Math.round(b.delayP95 ?? 0),
        stage: s.stage,
        kind: s.kind,
        round,
        ...common,
        note: 'per operation of the stage: its CREATE after the last COMPLETE of the operations that produced its input copies (for a bundling, its last member’s packaging), from the transition history; baseline: the caller, which waits for the whole stage before it',
      });
    }
  }
  const sum = (r: RunFigures) => r.statements.plane + r.statements.worker + r.statements.caller;
  print({
    name: 'pipeline_statements_per_completion',
    value: per(sum(p)),
    unit: 'statements/completion',
    baseline: per(sum(c)),
    round,
    ...common,
    plane: Math.round(per(p.statements.plane) * 100) / 100,
    worker: Math.round(per(p.statements.worker) * 100) / 100,
    caller: Math.round(per(p.statements.caller) * 100) / 100,
    baseline_plane: Math.round(per(c.statements.plane) * 100) / 100,
    baseline_worker: Math.round(per(c.statements.worker) * 100) / 100,
    baseline_caller: Math.round(per(c.statements.caller) * 100) / 100,
    plane_idle_per_s: Math.round(p.idle),
    baseline_plane_idle_per_s: Math.round(c.idle),
    note: 'every statement the control plane, the worker and the caller sent from the first submission to the last completion (BEGIN and COMMIT included, leadership’s keep-alive not), counted in this process, ÷ completions; baseline: the caller chaining the same operations itself. Idle loop passes count: plane_idle_per_s is what each control plane sent per second with nothing to do, just before (the pipeline’s pass runs at the scheduler’s interval)',
  });
  print({
    name: 'pipeline_commits_per_completion',
    value: per(p.commits),
    unit: 'commits/completion',
    baseline: per(c.commits),
    round,
    ...common,
    note: 'pg_stat_database xact_commit + xact_rollback of the run’s database from before the first submission until every connection closed, minus the bench’s own polls, ÷ completions',
  });
  print({
    name: 'pipeline_buffers_per_completion',
    value: per(p.buffers),
    unit: 'buffers/completion',
    baseline: per(c.buffers),
    round,
    ...common,
    note: 'pg_stat_database blks_hit + blks_read of the run’s database over the same window (autovacuum and the bench’s polls included) ÷ completions',
  });
}

try {
  say(`${PACKAGES} packages, ${BUNDLES} transfer packages, ${OPERATIONS} operations per run`);
  const { template, world } = await fillTemplate();
  for (let round = 0; round < ROUNDS; round++) {
    const order: Arm[] = round % 2 === 0 ? ['pipeline', 'caller'] : ['caller', 'pipeline'];
    const runs = new Map<Arm, RunFigures>();
    for (const arm of order) {
      const r = await runArm(arm, template, world, round);
      say(`round ${round} ${arm}: ${r.completions} completions in ${r.seconds.toFixed(1)} s`);
      runs.set(arm, r);
    }
    printRound(runs.get('pipeline') as RunFigures, runs.get('caller') as RunFigures, round);
  }
} finally {
  await databases.dropAll();
}
