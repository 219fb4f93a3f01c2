/**
 * End-to-end figures on the real Postgres and the real NATS JetStream. Prints one JSON
 * object per line: `{"name", "value", "unit"}`, and for a compared figure `"baseline"` and
 * `"ratio"` against the raw single-row commit rate of the same Postgres (postgres.js, 8
 * connections, single-row UPDATE by primary key) measured at the start of the same run; `"note"`
 * says how a figure was taken when that is not obvious. Uses its own uniquely named database(s)
 * and NATS prefix, and drops / destroys them at the end.
 *
 *   node --import tsx bench/e2e.ts
 *
 * Phases: baseline; e2e with workers in this process (every transfer moving one package to one
 * place, then — unless OPSTATE_BENCH_DISTINCT=0 — each moving a package of its own, so that every
 * completion creates its copy, and that again over OPSTATE_BENCH_STORED more stored transfers,
 * default 200000, 0 skips); dispatch → IN_PROGRESS latency at a trickle;
 * e2e with worker child processes (`opstate worker`); each e2e run's workers first drain WARM_UP
 * operations untimed (each worker process about as many);
 * control-plane memory with 1,000 and 1,000,000 operations stored (child `opstate control-plane`).
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), NATS_URL
 * (default nats://127.0.0.1:4222), OPSTATE_BENCH_E2E_OPS (operations per e2e run, default 5000),
 * OPSTATE_BENCH_CREATE_BATCH (createMany size, default 500), OPSTATE_BENCH_WARM_UP (operations
 * through each run's workers untimed first, default 5000, at most the run's), OPSTATE_BENCH_CONCURRENCY (worker
 * concurrency per queue, default 256; split between child workers), OPSTATE_BENCH_WORKER_PROCESSES
 * (default 2; 0 skips), OPSTATE_BENCH_WORKER_KINDS (what they serve, default transfer as the
 * in-process worker; all for every kind), OPSTATE_BENCH_TRICKLE (default 200; 0 skips), OPSTATE_BENCH_SECONDS
 * (baseline length, default 3), OPSTATE_BENCH_MEMORY_ROWS (default 1000000; 0 skips),
 * OPSTATE_BENCH_PROFILE=1 (also prints the statements the runtime ran, grouped by SQL text, and,
 * where the server preloads pg_stat_statements, what the server spent on each per operation, its
 * planning apart where it also sets pg_stat_statements.track_planning),
 * OPSTATE_BENCH_WAL_BREAKDOWN (default 1: each in-process run also prints its WAL by relation and
 * record type, read back with pg_walinspect; 0 skips), OPSTATE_BENCH_CPU_PROFILE=<file> (writes a V8 CPU profile of this process over each timed
 * in-process run, each over the one before, for Chrome DevTools or any .cpuprofile reader, and
 * prints what share of the run's busy time each part took: `e2e_cpu_profile_shares_<run>`).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import postgres from 'postgres';
import { ArtifactType } from '../machines/ArtifactType.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { DEFAULT_DATABASE_SCHEMA } from '../persistence/databaseSchema.ts';
import { migrate } from '../persistence/migrate.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import { openDatabase } from '../persistence/openDatabase.ts';
import { timeOrderedId } from '../persistence/timeOrderedId.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../runtime/Runtime.ts';
import { copiedColumns } from '../test/helpers/operationRows.ts';
import { handlersModule, prepareBuiltProcesses } from '../test/helpers/opstateCli.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { type Child, rssKb, spawnCli, stopChild, waitForOutput } from './lib/children.ts';
import { type CpuSample, cpuMsPer, cpuSample, postgresPidsOf } from './lib/cpu.ts';
import { relationBuffers, relationBuffersPer } from './lib/databaseBuffers.ts';
import { print } from './lib/figure.ts';
import { printTimings, type Timings, timeRuntime } from './lib/methodTimings.ts';
import { type CpuProfile, profileShares } from './lib/profileShares.ts';
import {
  rawCommitRate as measureRawCommitRate,
  prepareRawCommitRate,
  RAW_CONNECTIONS,
} from './lib/rawCommitRate.ts';
import { printServerStatements, serverStatements } from './lib/serverStatements.ts';
import { ADMIN_URL, envNumber, NATS_URL, WARM_UP as SHARED_WARM_UP } from './lib/settings.ts';
import {
  instrument,
  newCounter,
  printProfile,
  type StatementCounter,
  snapshotCounter,
} from './lib/statementCounter.ts';
import { openWalWindow, type WalWindow } from './lib/walBreakdown.ts';

const OPS = envNumber('OPSTATE_BENCH_E2E_OPS', 5000);
const CREATE_BATCH = envNumber('OPSTATE_BENCH_CREATE_BATCH', 500);
const CONCURRENCY = envNumber('OPSTATE_BENCH_CONCURRENCY', 256);
const CHILDREN = envNumber('OPSTATE_BENCH_WORKER_PROCESSES', 2);
const TRICKLE = envNumber('OPSTATE_BENCH_TRICKLE', 200);
const DISTINCT = envNumber('OPSTATE_BENCH_DISTINCT', 1) > 0;
const STORED = envNumber('OPSTATE_BENCH_STORED', 200_000);
/**
 * What the worker processes serve: the kind the in-process worker serves, so the two figures
 * compare like with like. `all` measures a worker whose slots are shared by six queues, five of
 * them idle (each idle queue probes with a one-message pull, the busy one gets the rest).
 */
const WORKER_KINDS = process.env.OPSTATE_BENCH_WORKER_KINDS ?? OperationKind.TRANSFER;
const SECONDS = envNumber('OPSTATE_BENCH_SECONDS', 3);
const MEMORY_ROWS = envNumber('OPSTATE_BENCH_MEMORY_ROWS', 1_000_000);
const CPU_PROFILE = process.env.OPSTATE_BENCH_CPU_PROFILE;
const WAL_BREAKDOWN = envNumber('OPSTATE_BENCH_WAL_BREAKDOWN', 1) > 0;
const DONE_TIMEOUT_MS = 120_000;
/** The warm-up (`WARM_UP` in lib/settings.ts), at most the run itself. */
const WARM_UP = Math.min(SHARED_WARM_UP, OPS);

/** Control-plane loops tuned for throughput; the transport keeps its defaults. */
const TIMING: Partial<RuntimeTiming> = {
  schedulerIntervalMs: 10,
  relayIntervalMs: 10,
  leaderPollMs: 250,
};

// Worker processes run the built package, with this fixture compiled against it.
await prepareBuiltProcesses((line) => process.stderr.write(`[bench] ${line}\n`));
const HANDLERS = handlersModule(new URL('./fixtures/noopHandlers.ts', import.meta.url));

/** WARNING and ERROR lines go to stderr; the rest would only cost time. */
const quietLogger: Logger = {
  log(level, message, fields) {
    if (level !== 'WARNING' && level !== 'ERROR') return;
    process.stderr.write(`[e2e] ${level} ${message} ${JSON.stringify(fields ?? {})}\n`);
  },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[i] as number;
}

/**
 * Starts a V8 CPU profile of this process when asked. The returned function writes it (each run
 * over the one before) and prints `e2e_cpu_profile_shares_<label>`: the busy time of this process
 * per operation, and what share of it each part took (socket writes to Postgres and to NATS, garbage
 * collection, the clients, opstate's folders: bench/lib/profileShares.ts).
 */
async function startCpuProfile(): Promise<(label: string, n: number) => Promise<void>> {
  if (CPU_PROFILE === undefined || CPU_PROFILE === '') return async () => {};
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return async (label, n) => {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(CPU_PROFILE, JSON.stringify(profile));
    session.disconnect();
    process.stderr.write(`[e2e] CPU profile of the ${label} run written to ${CPU_PROFILE}\n`);
    const shares = profileShares(profile as CpuProfile);
    print({
      name: `e2e_cpu_profile_shares_${label}`,
      value: shares.busyMs / n,
      unit: 'cpu ms/op',
      note: "this process's sampled busy time per operation (V8 CPU profile of the timed run; idle time and the profiler's own work left out), and each part's share of it: socket writes are the native writes with the Postgres or NATS client on the stack",
      idle_ms: Math.round(shares.idleMs),
      profiler_ms: Math.round(shares.profilerMs),
      parts: shares.parts.map((p) => ({ part: p.part, share: Math.round(p.share * 1000) / 1000 })),
    });
  };
}

/** How the bench sends its own SQL to the bench database. */
type Own = <T extends postgres.Row>(text: string, params?: unknown[]) => Promise<T[]>;

/**
 * Stores `count` more COMPLETED transfers as the runtime would have left them: the operation (a
 * copy of a real COMPLETED transfer's row under a new id), its subtype row, its four transitions
 * (copies of that operation's), a package of its own, the package's copy at `destination` and the
 * output link, each keyed by a time-ordered id as the runtime keys its rows. Written 20,000 at a time,
 * two statements at once, with SQL; every constraint and trigger applies.
 */
async function fillStoredHistory(
  own: Own,
  count: number,
  source: string,
  destination: string,
): Promise<void> {
  const [template] = await own<{ id: string }>(
    `select id from operation where kind = 'transfer' and status = 'COMPLETED' limit 1`,
  );
  if (template === undefined) throw new Error('no COMPLETED transfer to copy');
  // Two statements at a time (the bench connection's pool), each 20,000 transfers.
  const batches = Array.from({ length: Math.ceil(count / FILL_BATCH) }, (_, i) => i * FILL_BATCH);
  const lane = async () => {
    for (let done = batches.shift(); done !== undefined; done = batches.shift()) {
      await fillBatch(own, template.id, Math.min(FILL_BATCH, count - done), source, destination);
      // The history's partitions made ahead, as the leader would every minute. Its lock on
      // operation may time out behind the other lane's batch: the next batch asks again.
      await own('select opstate_history_extend()').catch(() => undefined);
    }
  };
  await Promise.all([lane(), lane()]);
}

const FILL_BATCH = 20_000;

/** `n` COMPLETED transfers copied from `template`, each with its package, copy and history. */
async function fillBatch(
  own: Own,
  template: string,
  n: number,
  source: string,
  destination: string,
): Promise<void> {
  await own(
    `with g as (
         select opstate_uuid_v7() as op, opstate_uuid_v7() as pc, opstate_uuid_v7() as dtp
         from generate_series(1, $2::int)
       ),
       t as (select * from operation where id = $1::uuid),
       p as (insert into data_transfer_package (id, name) select dtp, 'stored-' || dtp from g),
       o as (
         insert into operation (id, ${copiedColumns('')}, target_location_id)
         select g.op, ${copiedColumns('t.')}, t.target_location_id from g, t
       ),
       s as (
         insert into transfer_operation
           (operation_id, data_transfer_package_id, source_location_id, destination_location_id)
         select op, dtp, $3::uuid, $4::uuid from g
       ),
       tr as (
         insert into operation_transition
           (operation_id, from_status, to_status, event, attempt, by, reason, at)
         select g.op, x.from_status, x.to_status, x.event, x.attempt, x.by, x.reason, x.at
         from g, (select * from operation_transition where operation_id = $1::uuid) x
       ),
       c as (
         insert into physical_copy (id, artifact_type, artifact_id, location_id)
         select pc, 'data_transfer_package', dtp, $4::uuid from g
       ),
       cs as (
         insert into data_transfer_package_physical_copy (physical_copy_id, data_transfer_package_id)
         select pc, dtp from g
       )
       insert into operation_output (operation_id, physical_copy_id) select op, pc from g`,
    [template, n, source, destination],
  );
}

/** The bench database's counters: commits, rows written, buffers, WAL, and the bench's own queries. */
interface PgStats {
  readonly xacts: number;
  readonly inserted: number;
  readonly updated: number;
  readonly deleted: number;
  readonly buffers: number;
  readonly walBytes: number;
  readonly own: number;
}

/** The bench's databases, its connections to them, and what it started (closed at the end). */
interface Bench {
  readonly run: string;
  /** The bench database's name. */
  readonly name: string;
  readonly prefix: string;
  readonly dbUrl: string;
  readonly admin: postgres.Sql;
  readonly raw: postgres.Sql;
  readonly rawBench: postgres.Sql;
  /** Queries this bench sends to the bench database, subtracted from the server's counts. */
  readonly own: Own;
  pgStats(): Promise<PgStats>;
  rawCommitRate(seconds: number): Promise<number>;
  readonly runtimes: Runtime[];
  readonly children: Child[];
  readonly extraPrefixes: string[];
  plane?: Runtime;
}

/** Creates the bench database and the baseline's own, and connects to both. */
async function openBench(): Promise<Bench> {
  const run = randomBytes(5).toString('hex');
  const name = `opstate_e2e_${run}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const dbUrl = url.toString();
  // opstate's tables are in its schema: this connection reads them as opstate's own do.
  const raw = postgres(dbUrl, {
    max: 2,
    onnotice: () => {},
    connection: { search_path: DEFAULT_DATABASE_SCHEMA },
  });
  // The baseline runs in a database of its own, so the bench database's counters stay clean.
  await admin.unsafe(`create database ${name}_raw`);
  const rawUrl = new URL(ADMIN_URL);
  rawUrl.pathname = `/${name}_raw`;
  const rawBench = postgres(rawUrl.toString(), { max: RAW_CONNECTIONS, onnotice: () => {} });
  let ownQueries = 0;
  const own = async <T extends postgres.Row>(text: string, params: unknown[] = []) => {
    ownQueries++;
    return (await raw.unsafe(text, params as postgres.ParameterOrJSON<never>[])) as unknown as T[];
  };
  const pgStats = async (): Promise<PgStats> => {
    const [row] = await admin.unsafe(
      `select (xact_commit + xact_rollback)::bigint as xacts, tup_inserted::bigint as ins,
        tup_updated::bigint as upd, tup_deleted::bigint as del, tup_fetched::bigint as fetched,
        (blks_hit + blks_read)::bigint as blks, (pg_current_wal_lsn() - '0/0')::bigint as wal
       from pg_stat_database where datname = $1`,
      [name],
    );
    return {
      xacts: Number(row?.xacts),
      inserted: Number(row?.ins),
      updated: Number(row?.upd),
      deleted: Number(row?.del),
      buffers: Number(row?.blks),
      walBytes: Number(row?.wal),
      own: ownQueries,
    };
  };
  return {
    run,
    name,
    prefix: `e2e_${run}`,
    dbUrl,
    admin,
    raw,
    rawBench,
    own,
    pgStats,
    rawCommitRate: (seconds) => measureRawCommitRate(rawBench, seconds),
    runtimes: [],
    children: [],
    extraPrefixes: [],
  };
}

/** Stops what the bench started, destroys its streams and drops its databases. */
async function closeBench(bench: Bench): Promise<void> {
  const { admin, name } = bench;
  for (const c of bench.children) await stopChild(c, 'SIGKILL').catch(() => undefined);
  for (const r of [...bench.runtimes]) await r.close().catch(() => undefined);
  if (bench.plane !== undefined) await bench.plane.close().catch(() => undefined);
  for (const p of [bench.prefix, ...bench.extraPrefixes]) {
    const t = await createJetStreamTransport({
      insecureNats: true,
      servers: NATS_URL,
      prefix: p,
    }).catch(() => undefined);
    await t?.destroy().catch(() => undefined);
  }
  await bench.raw.end({ timeout: 5 });
  await bench.rawBench.end({ timeout: 5 });
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.unsafe(`drop database if exists ${name}_raw with (force)`);
  await admin.end({ timeout: 5 });
}

type ControlPlane = ReturnType<Runtime['startControlPlane']>;

/** Starts the control plane in `plane` and waits until it leads. */
async function lead(plane: Runtime): Promise<ControlPlane> {
  const started = plane.startControlPlane();
  const deadlineLeader = Date.now() + 30_000;
  while (!started.isLeader) {
    if (Date.now() > deadlineLeader) throw new Error('control plane never became leader');
    await sleep(20);
  }
  return started;
}

/** The deployment: a control plane in this process, and a world for TRANSFER operations. */
interface Deployment {
  readonly plane: Runtime;
  readonly planeCounter: StatementCounter;
  readonly planeTimings: Timings;
  control: ControlPlane;
  readonly source: { readonly id: string };
  readonly buffer: { readonly id: string };
  /** A transfer of the one package to the buffer. */
  readonly input: CreateOperationInput;
  /** What every one of those transfers must produce: the package at the buffer. */
  readonly produced: readonly OutputCopy[];
  /** The handler that returns `produced`. */
  readonly sameCopy: OperationHandler;
}

async function openDeployment(bench: Bench): Promise<Deployment> {
  const planeCounter = newCounter();
  const plane = await createRuntime({
    databaseUrl: bench.dbUrl,
    natsUrl: NATS_URL,
    prefix: bench.prefix,
    timing: TIMING,
    logger: quietLogger,
  });
  bench.plane = plane;
  instrument(plane.database, planeCounter);
  const planeTimings: Timings = new Map();
  timeRuntime(plane, planeTimings, 'plane');
  const control = await lead(plane);
  const loc = (n: string, locationType: LocationType) =>
    plane.artifacts.addLocation({ site: 'e2e', name: n, locationType, storageRoot: `/${n}` });
  const source = await loc('source', LocationType.SOURCE);
  const buffer = await loc('buffer', LocationType.BUFFER);
  const dtp = await plane.artifacts.addDataTransferPackage({ name: `dtp-${bench.run}` });
  // One live copy at the buffer, which later completions find already there.
  const produced = [
    { artifactType: ArtifactType.DATA_TRANSFER_PACKAGE, artifactId: dtp, locationId: buffer.id },
  ];
  return {
    plane,
    planeCounter,
    planeTimings,
    control,
    source,
    buffer,
    input: {
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: dtp,
        sourceLocationId: source.id,
        destinationLocationId: buffer.id,
      },
    },
    produced,
    sameCopy: async () => ({ outputs: produced }),
  };
}

/** A worker in this process, in a runtime of its own (own pool and NATS connection), counted. */
async function openWorker(
  bench: Bench,
  d: Deployment,
  concurrency: number,
  handler: OperationHandler = d.sameCopy,
) {
  const counter = newCounter();
  const runtime = await createRuntime({
    databaseUrl: bench.dbUrl,
    natsUrl: NATS_URL,
    prefix: bench.prefix,
    timing: TIMING,
    logger: quietLogger,
  });
  bench.runtimes.push(runtime);
  instrument(runtime.database, counter);
  const timings: Timings = new Map();
  timeRuntime(runtime, timings, 'worker');
  runtime.startWorker({
    kinds: [OperationKind.TRANSFER],
    handlers: { [OperationKind.TRANSFER]: handler },
    concurrency,
  });
  return { runtime, counter, timings };
}

async function closeWorker(bench: Bench, runtime: Runtime): Promise<void> {
  bench.runtimes.splice(bench.runtimes.indexOf(runtime), 1);
  await runtime.close();
}

/**
 * Waits until no operation is PENDING, SCHEDULED or IN_PROGRESS (cheap: the partial indexes
 * hold only active rows), then checks that every one of `ids` is COMPLETED: throws when one
 * is not (FAILED, or missing). Reads those rows by key, not the whole table, so its cost does
 * not grow with what is stored (the stored-history run's CPU figure includes it).
 */
async function waitCompleted(own: Own, ids: readonly string[], pollMs: number): Promise<void> {
  const until = Date.now() + DONE_TIMEOUT_MS;
  for (;;) {
    const [row] = await own<{ busy: boolean }>(
      `select exists(select 1 from operation where status = 'PENDING')
         or exists(select 1 from operation where status in ('SCHEDULED', 'IN_PROGRESS')) as busy`,
    );
    if (row?.busy === false) break;
    if (Date.now() > until) throw new Error('timed out waiting for the operations to finish');
    await sleep(pollMs);
  }
  const rows = await own<{ status: string; n: number }>(
    'select status, count(*)::int as n from operation where id = any($1::uuid[]) group by status',
    [ids],
  );
  const by = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  if ((by.COMPLETED ?? 0) !== ids.length)
    throw new Error(`not all ${ids.length} completed: ${JSON.stringify(by)}`);
}

/** `n` transfers of the one package to the buffer. */
const sameTransfers = (d: Deployment, n: number) => Array.from({ length: n }, () => d.input);

/** Submits `inputs` in createMany batches and waits for all of them to complete. */
async function submitAndWait(
  bench: Bench,
  d: Deployment,
  inputs: readonly CreateOperationInput[],
): Promise<{ ids: string[]; wallSeconds: number }> {
  const ids: string[] = [];
  const t = performance.now();
  for (let i = 0; i < inputs.length; i += CREATE_BATCH) {
    ids.push(...(await d.plane.store.createMany(inputs.slice(i, i + CREATE_BATCH))));
  }
  await waitCompleted(bench.own, ids, 50);
  return { ids, wallSeconds: (performance.now() - t) / 1000 };
}

/** Span and per-stage medians of a set of operations, from their own timestamps. */
async function spanOf(own: Own, ids: readonly string[]) {
  const [row] = await own<Record<string, number>>(
    `select extract(epoch from max(finished_at) - min(created_at))::float8 as span,
       percentile_cont(0.5) within group (order by extract(epoch from scheduled_at - created_at)) * 1000 as sched,
       percentile_cont(0.5) within group (order by extract(epoch from started_at - scheduled_at)) * 1000 as start,
       percentile_cont(0.5) within group (order by extract(epoch from finished_at - started_at)) * 1000 as run,
       percentile_cont(0.5) within group (order by extract(epoch from finished_at - created_at)) * 1000 as total,
       extract(epoch from percentile_disc(0.9) within group (order by finished_at)
         - percentile_disc(0.1) within group (order by finished_at))::float8 as middle
     from operation where id = any($1::uuid[])`,
    [ids],
  );
  return {
    span: Number(row?.span),
    middle: Number(row?.middle),
    sched: Number(row?.sched),
    start: Number(row?.start),
    run: Number(row?.run),
    total: Number(row?.total),
  };
}

/** What one timed e2e run measured, for its figures. */
interface Phase {
  readonly label: string;
  /** The raw commit rate just before and just after the run. */
  readonly baselines: [number, number];
  readonly n: number;
  readonly result: { ids: string[]; wallSeconds: number };
  readonly span: Awaited<ReturnType<typeof spanOf>>;
  readonly db: { before: PgStats; after: PgStats };
  readonly cpu: { before: CpuSample; after: CpuSample; postgresPids: ReadonlySet<number> };
  readonly counted: { label: string; before: StatementCounter; after: StatementCounter }[];
  readonly note: string;
}

/** The raw single-row commit rate around a run: the mean of before and after, its baseline. */
function meanRawRate({ baselines }: Phase): number {
  return (baselines[0] + baselines[1]) / 2;
}

/** The run's throughput (whole and sustained) and its per-stage medians; returns ops/s. */
function printThroughput(phase: Phase): number {
  const { label, baselines, n, result, span, note } = phase;
  const rate = n / span.span;
  const baseline = meanRawRate(phase);
  print({
    name: `e2e_ops_per_s_${label}`,
    value: rate,
    unit: 'ops/s',
    baseline,
    note: `${n} TRANSFER operations, no-op handler, create (createMany ×${CREATE_BATCH}) → COMPLETED; time from the first created_at to the last finished_at; ${note}`,
    wall_clock_ops_per_s: Math.round(n / result.wallSeconds),
    raw_commits_per_s_before_after: [Math.round(baselines[0]), Math.round(baselines[1])],
    target: '≥ 0.5 × first, then ≥ 2 × the raw commit rate',
  });
  // percentile_disc(p) is the ⌈p·n⌉-th finish: this many operations finished between the two
  // (none, and no figure, in a run too short for the two to differ).
  const middleOps = Math.ceil(0.9 * n) - Math.ceil(0.1 * n);
  if (span.middle > 0 && middleOps > 0)
    print({
      name: `e2e_sustained_ops_per_s_${label}`,
      value: middleOps / span.middle,
      unit: 'ops/s',
      baseline,
      note: 'the same run once the pipeline is full: the operations that finished between the 10th- and the 90th-percentile finished_at ÷ the time between the two. It leaves out the start, when the first operations are still on their way through the four transitions and nothing finishes yet, and the end, when the last ones drain; the figure above counts both. The raw rate is a steady rate too. The peers have no such figure (they finish their first job within milliseconds)',
      whole_run_ops_per_s: Math.round(rate),
    });
  print({
    name: `e2e_stage_median_ms_${label}`,
    value: span.total,
    unit: 'ms',
    note: 'median per operation under full load: created→scheduled (claim), scheduled→started (relay, NATS, delivery, load, START), started→finished (heartbeat, handler, COMPLETE); value = created→finished',
    created_to_scheduled: Math.round(span.sched * 10) / 10,
    scheduled_to_started: Math.round(span.start * 10) / 10,
    started_to_finished: Math.round(span.run * 10) / 10,
  });
  return rate;
}

/** The work the database did per operation: commits, rows, WAL and buffers. */
function printDatabaseWork(phase: Phase): { walBytesPerOp: number; buffersPerOp: number } {
  const { label, n, db } = phase;
  const walBytesPerOp = (db.after.walBytes - db.before.walBytes) / n;
  const buffersPerOp = (db.after.buffers - db.before.buffers) / n;
  const xacts = db.after.xacts - db.before.xacts - (db.after.own - db.before.own);
  print({
    name: `e2e_db_transactions_per_op_${label}`,
    value: xacts / n,
    unit: 'commits/op',
    note: 'pg_stat_database xact_commit + xact_rollback of the bench database over the run, minus the bench’s own polling queries, ÷ operations; in autocommit one statement is one commit, a multi-statement transaction also one. Includes idle control-plane passes and worker start-up; the server flushes these counters lazily (≤ 10 s for idle connections), so ±a few dozen',
    tup_inserted_per_op: Math.round(((db.after.inserted - db.before.inserted) / n) * 100) / 100,
    tup_updated_per_op: Math.round(((db.after.updated - db.before.updated) / n) * 100) / 100,
    tup_deleted_per_op: Math.round(((db.after.deleted - db.before.deleted) / n) * 100) / 100,
  });
  print({
    name: `e2e_wal_bytes_per_op_${label}`,
    value: Math.round(walBytesPerOp),
    unit: 'B/op',
    note: 'WAL the server wrote over the run (pg_current_wal_lsn, the whole server: nothing else writes during a bench) ÷ operations, and the bench database’s buffer accesses (pg_stat_database blks_hit + blks_read) ÷ operations: the work Postgres does per operation, counted, so it does not move with the machine’s speed as CPU time does. Both include what the idle loops do over the same window, and the buffer count, like the commits above, what connections had not yet reported when it was read',
    buffers_per_op: Math.round(buffersPerOp),
  });
  return { walBytesPerOp, buffersPerOp };
}

/**
 * Where the run's WAL went, read back from the WAL itself (`OPSTATE_BENCH_WAL_BREAKDOWN`);
 * returns its full-page image bytes per operation, undefined when it was not read back.
 */
async function printWalBreakdown(
  label: string,
  wal: WalWindow | undefined,
  n: number,
): Promise<number | undefined> {
  if (wal === undefined) {
    if (WAL_BREAKDOWN) process.stderr.write('[bench] no pg_walinspect: no WAL breakdown\n');
    return undefined;
  }
  try {
    const b = await wal.stop(n);
    print({
      name: `e2e_wal_by_relation_${label}`,
      value: b.bytes,
      unit: 'B/op',
      note: 'the WAL of the run read back record by record (pg_walinspect), per operation: by the relation of each record’s first block (a heap update that also writes an index is the heap’s; the index entries are records of their own), and by record type; fpi = full-page images (a page’s first change after a checkpoint), so the total moves with where checkpoints fall',
      fpi_bytes_per_op: b.fpi,
      records_per_op: b.records,
      relations: b.relations.slice(0, 24),
      record_types: b.recordTypes.slice(0, 16),
    });
    return b.fpi;
  } finally {
    await wal.close();
  }
}

/** Statements per operation as this process counted them, per runtime. */
function printStatements(phase: Phase): void {
  const { label, n, counted } = phase;
  for (const c of counted) {
    print({
      name: `e2e_statements_per_op_${label}_${c.label}`,
      value: (c.after.statements - c.before.statements) / n,
      unit: 'statements/op',
      note: 'counted in this process at the runtime’s database object: every statement, BEGIN and COMMIT included (leadership’s keep-alive excluded)',
      transactions_per_op:
        Math.round(((c.after.transactions - c.before.transactions) / n) * 1000) / 1000,
    });
    printProfile(`${label} ${c.label}`, c.before, c.after, n);
  }
}

/** CPU time per operation across the processes that did the work. */
function printCpu(phase: Phase): number {
  const { label, n, cpu } = phase;
  const c = cpuMsPer(cpu.before, cpu.after, n, cpu.postgresPids);
  print({
    name: `e2e_cpu_ms_per_op_${label}`,
    value: c.total,
    unit: 'cpu ms/op',
    note: 'CPU time (user+system) over the run ÷ operations: this process, the worker processes, the Postgres backends of the bench database plus the server’s WAL writer, checkpointer and background writer (other databases’ backends on the shared server left out), and nats-server (shared: it carries other work too); the machine has 2 cores, so 1000 ms ÷ this × 2 bounds ops/s',
    target_ms: 0.5,
    bench_process: c.bench_process,
    worker_processes: c.child_processes,
    postgres: c.postgres,
    nats_server: c.nats_server,
  });
  return c.total;
}

/** What one run did per operation, for comparing two runs of the same bench. */
interface PhaseFigures {
  readonly opsPerS: number;
  /** The raw single-row commit rate around the run (the mean of before and after). */
  readonly rawCommitsPerS: number;
  readonly walBytesPerOp: number;
  readonly buffersPerOp: number;
  readonly cpuMsPerOp: number;
  /** Of the WAL, full-page images, when the run's WAL was read back (`WAL_BREAKDOWN`). */
  readonly fullPageImageBytesPerOp?: number | undefined;
}

/** Prints every figure of one timed e2e run; returns what it did per operation. */
function reportPhase(phase: Phase): PhaseFigures {
  const opsPerS = printThroughput(phase);
  const work = printDatabaseWork(phase);
  printStatements(phase);
  const cpuMsPerOp = printCpu(phase);
  return {
    opsPerS,
    rawCommitsPerS: meanRawRate(phase),
    ...work,
    cpuMsPerOp,
  };
}

/**
 * An e2e run with the workers in this process (their own runtime: own pool and NATS
 * connection), reported under `label`; returns what it did per operation.
 */
async function inProcessRun(
  bench: Bench,
  d: Deployment,
  label: string,
  note: string,
  handler: OperationHandler = d.sameCopy,
  inputs: readonly CreateOperationInput[] = sameTransfers(d, OPS),
): Promise<PhaseFigures> {
  const { admin, name } = bench;
  const n = inputs.length;
  // Warm-up through the worker that is timed, so that its pool's connections have their
  // statements prepared and planned and their backends' caches filled, as a worker that has
  // been running has. Untimed, before anything is sampled.
  let warming = true;
  const worker = await openWorker(bench, d, CONCURRENCY, (ctx) =>
    warming ? d.sameCopy(ctx) : handler(ctx),
  );
  await submitAndWait(bench, d, sameTransfers(d, WARM_UP));
  warming = false;
  const rawBefore = await bench.rawCommitRate(SECONDS);
  await sleep(1500);
  const wal = WAL_BREAKDOWN ? await openWalWindow(bench.dbUrl) : undefined;
  const relationsBefore = await relationBuffers(bench.own);
  const dbBefore = await bench.pgStats();
  d.planeTimings.clear();
  const pBefore = snapshotCounter(d.planeCounter);
  const wBefore = snapshotCounter(worker.counter);
  const serverBefore = await serverStatements(admin, name);
  const stopCpuProfile = await startCpuProfile();
  const cpuBefore = cpuSample();
  const result = await submitAndWait(bench, d, inputs);
  const cpuAfter = cpuSample();
  const postgresPids = await postgresPidsOf(admin, [name]);
  await stopCpuProfile(label, n);
  printServerStatements(label, serverBefore, await serverStatements(admin, name), n);
  const pAfter = snapshotCounter(d.planeCounter);
  const wAfter = snapshotCounter(worker.counter);
  const span = await spanOf(bench.own, result.ids);
  printTimings(`${label} worker`, worker.timings, n);
  printTimings(`${label} control_plane`, d.planeTimings, n);
  await closeWorker(bench, worker.runtime);
  await sleep(1500);
  const dbAfter = await bench.pgStats();
  const relationsAfter = await relationBuffers(bench.own);
  const fullPageImageBytesPerOp = await printWalBreakdown(label, wal, n);
  const byRelation = relationBuffersPer(relationsBefore, relationsAfter, n);
  print({
    name: `e2e_buffers_by_relation_${label}`,
    value: byRelation.reduce((sum, r) => sum + r.buffers_per_op, 0),
    unit: 'buffers/op',
    note: 'buffer accesses per operation by table and index (pg_statio_user_tables, heap and TOAST, and pg_statio_user_indexes; partitions under their parent), largest first, with each index’s scans per operation (pg_stat_user_indexes.idx_scan: lookups, foreign-key and uniqueness checks): where the database work of the run went, and, compared with another run, which relation grew. Lazily reported like the database total, so a little under it',
    relations: byRelation.slice(0, 24),
  });
  const rawAfter = await bench.rawCommitRate(SECONDS);
  const figures = reportPhase({
    label,
    baselines: [rawBefore, rawAfter],
    n,
    result,
    span,
    db: { before: dbBefore, after: dbAfter },
    cpu: { before: cpuBefore, after: cpuAfter, postgresPids },
    counted: [
      { label: 'control_plane', before: pBefore, after: pAfter },
      { label: 'worker', before: wBefore, after: wAfter },
    ],
    note: `${note}; control plane and one worker runtime (concurrency ${CONCURRENCY}) in this process, after ${WARM_UP} operations through that worker untimed`,
  });
  return { ...figures, fullPageImageBytesPerOp };
}

/**
 * `OPS` transfers, each moving a new package of its own to the buffer, and a handler that
 * returns each one's own output (ids chosen here, so the handler reads nothing).
 */
async function packagePerTransfer(bench: Bench, d: Deployment) {
  const packages = await bench.own<{ id: string }>(
    `insert into data_transfer_package (name)
     select 'dtp-' || gen_random_uuid() from generate_series(1, $1::int) returning id`,
    [OPS],
  );
  const outputOf = new Map<string, OutputCopy[]>();
  const inputs = packages.map((p): CreateOperationInput => {
    // The id the runtime would give it (time-ordered), chosen here to know its output.
    const id = timeOrderedId(Date.now());
    const artifactId = String(p.id);
    outputOf.set(id, [
      { artifactType: ArtifactType.DATA_TRANSFER_PACKAGE, artifactId, locationId: d.buffer.id },
    ]);
    return {
      id,
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: artifactId,
        sourceLocationId: d.source.id,
        destinationLocationId: d.buffer.id,
      },
    };
  });
  const handler: OperationHandler = async (ctx) => ({
    outputs: outputOf.get(ctx.operation.id) ?? [],
  });
  return { inputs, handler };
}

/**
 * 2b. The same with a package of its own per transfer, as a pipeline's transfers have: every
 * completion creates its copy (the copy, its subtype row and the link), and the copies already
 * stored at the destination grow by one per operation.
 *
 * 2c. The same again over a stored history: STORED more COMPLETED transfers, each with its
 * subtype row, its four transitions, its package's copy at the same buffer and the link,
 * written with SQL as copies of a real operation's rows, then vacuumed, analyzed and
 * checkpointed, as autovacuum and the checkpointer would have left a deployment that grew
 * over weeks (so the run is not charged for the fill's aftermath). A hot path whose cost
 * grows with the tables shows here: the two runs are compared in ops/s, in ops/s per raw commit,
 * and in buffers, WAL and CPU per operation, and each run's buffers are broken down by relation.
 */
async function distinctOutputRuns(bench: Bench, d: Deployment): Promise<void> {
  const { inputs, handler } = await packagePerTransfer(bench, d);
  const fresh = await inProcessRun(
    bench,
    d,
    'in_process_distinct_outputs',
    'a package of its own per transfer, each completion creating its copy',
    handler,
    inputs,
  );
  if (STORED <= 0) return;
  const fillStart = performance.now();
  await fillStoredHistory(bench.own, STORED, d.source.id, d.buffer.id);
  await bench.own('vacuum (analyze)');
  await bench.own('checkpoint');
  // The circuit breakers read every transition committed after they started: a restarted
  // control plane starts after the fill, as one running while the history grew would have
  // read it long ago (else the run pays for reading the filled history once).
  await d.control.stop();
  // Likewise the dispatch relay: one running while the history grew would have read past each
  // filled SCHEDULE transition as it was written. Left behind them, it reads millions of stale
  // dispatches (and their operations) during the run. Every earlier run's operation is COMPLETED.
  const { newest } = await d.plane.store.relayPosition();
  await d.plane.store.saveRelayCursor(newest);
  d.control = await lead(d.plane);
  const fillSeconds = (performance.now() - fillStart) / 1000;
  const next = await packagePerTransfer(bench, d);
  const stored = await inProcessRun(
    bench,
    d,
    'in_process_stored_history',
    `as the run above, over ${STORED} more COMPLETED transfers with their copies stored (filled in ${Math.round(fillSeconds)} s)`,
    next.handler,
    next.inputs,
  );
  print({
    name: 'e2e_stored_history_ratio',
    value: stored.opsPerS,
    unit: 'ops/s',
    baseline: fresh.opsPerS,
    note: `ops/s with ${STORED} more operations and copies stored ÷ ops/s of the package-per-transfer run just before, same run; a hot path that does not grow with the tables stays near 1`,
  });
  // The same two runs in units that move less with the machine. The server's own commit rate,
  // measured around each run, can fall after the fill for reasons of its own (the disk after
  // gigabytes written, the page cache): each run's throughput over that rate takes it out.
  print({
    name: 'e2e_stored_history_ratio_per_raw',
    value: stored.opsPerS / stored.rawCommitsPerS,
    unit: 'ops per raw commit',
    baseline: fresh.opsPerS / fresh.rawCommitsPerS,
    note: `each run's ops/s ÷ the raw single-row commit rate measured around it (stored run ${Math.round(stored.rawCommitsPerS)}/s, run before ${Math.round(fresh.rawCommitsPerS)}/s); ratio = stored ÷ before`,
  });
  for (const [name, unit, of] of [
    ['buffers', 'buffers/op', (f: PhaseFigures) => f.buffersPerOp],
    ['wal', 'B/op', (f: PhaseFigures) => f.walBytesPerOp],
    ['cpu', 'cpu ms/op', (f: PhaseFigures) => f.cpuMsPerOp],
  ] as const) {
    print({
      name: `e2e_stored_history_${name}_ratio`,
      value: of(stored),
      unit,
      baseline: of(fresh),
      note: `per operation with ${STORED} more stored ÷ per operation in the run just before (ratio > 1: the stored run cost more)`,
    });
  }
  // The fill ends with a checkpoint, so the stored run writes a full-page image at the first
  // change of every page it touches, which the run before it need not have: without them, the
  // WAL compares what the two runs wrote for their operations.
  const fpiStored = stored.fullPageImageBytesPerOp;
  const fpiFresh = fresh.fullPageImageBytesPerOp;
  if (fpiStored !== undefined && fpiFresh !== undefined)
    print({
      name: 'e2e_stored_history_wal_ratio_without_fpi',
      value: stored.walBytesPerOp - fpiStored,
      unit: 'B/op',
      baseline: fresh.walBytesPerOp - fpiFresh,
      note: `WAL per operation less its full-page images (pg_walinspect: ${Math.round(fpiStored)} B/op stored, ${Math.round(fpiFresh)} before), with ${STORED} more stored ÷ the run just before`,
    });
}

/** 3. Dispatch → IN_PROGRESS at a trickle: one operation at a time, submitted with submit(). */
async function trickleRun(bench: Bench, d: Deployment): Promise<void> {
  const { own } = bench;
  const worker = await openWorker(bench, d, 4);
  const one = async () => {
    const id = await d.plane.submit(d.input);
    for (;;) {
      const [row] = await own<{ status: string }>('select status from operation where id = $1', [
        id,
      ]);
      if (row?.status === 'COMPLETED') return id;
      if (row?.status === 'FAILED') throw new Error(`trickle operation ${id} FAILED`);
      await sleep(2);
    }
  };
  for (let i = 0; i < 10; i++) await one(); // warm-up
  worker.timings.clear();
  d.planeTimings.clear();
  const ids: string[] = [];
  for (let i = 0; i < TRICKLE; i++) ids.push(await one());
  printTimings('trickle worker', worker.timings, TRICKLE);
  printTimings('trickle control_plane', d.planeTimings, TRICKLE);
  const rows = await own<{ submit: number; schedule: number; claim: number }>(
    `select extract(epoch from started_at - created_at)::float8 * 1000 as submit,
       extract(epoch from started_at - scheduled_at)::float8 * 1000 as schedule,
       extract(epoch from scheduled_at - created_at)::float8 * 1000 as claim
     from operation where id = any($1::uuid[])`,
    [ids],
  );
  await closeWorker(bench, worker.runtime);
  printTrickle(rows);
}

/** The trickle's latencies, p50 and p99 of each span, beside graphile-worker's published ones. */
function printTrickle(rows: readonly { submit: number; schedule: number; claim: number }[]) {
  const sorted = (k: 'submit' | 'schedule' | 'claim') =>
    rows.map((r) => Number(r[k])).sort((a, b) => a - b);
  const note =
    'graphile-worker 0.18 on one of our 2-core machines (published, not this run): add → start p50 5.8 ms, p99 13.9 ms';
  for (const [k, label] of [
    ['submit', 'submit_to_start'],
    ['schedule', 'schedule_to_start'],
    ['claim', 'submit_to_schedule'],
  ] as const) {
    const s = sorted(k);
    print({
      name: `trickle_latency_${label}_p50`,
      value: percentile(s, 0.5),
      unit: 'ms',
      note: `${TRICKLE} operations one at a time (runtime.submit, wait COMPLETED, next), from the rows' timestamps; ${note}`,
      reference_p50_ms: 5.8,
    });
    print({
      name: `trickle_latency_${label}_p99`,
      value: percentile(s, 0.99),
      unit: 'ms',
      reference_p99_ms: 13.9,
      p99_over_p50: Math.round((percentile(s, 0.99) / percentile(s, 0.5)) * 100) / 100,
    });
  }
}

/** 4. e2e with worker child processes (`opstate worker`), concurrency split between them. */
async function workerProcessesRun(bench: Bench, d: Deployment): Promise<void> {
  const { admin, name } = bench;
  const rawBefore = await bench.rawCommitRate(SECONDS);
  const perChild = Math.max(1, Math.round(CONCURRENCY / CHILDREN));
  const mine = Array.from({ length: CHILDREN }, (_, i) =>
    spawnCli(
      [
        'worker',
        '--kinds',
        WORKER_KINDS,
        '--handlers',
        HANDLERS,
        '--concurrency',
        String(perChild),
        '--id',
        `bench-w${i}`,
      ],
      {
        DATABASE_URL: bench.dbUrl,
        NATS_URL,
        OPSTATE_PREFIX: bench.prefix,
        OPSTATE_TIMING: JSON.stringify(TIMING),
        BENCH_OUTPUTS: JSON.stringify(d.produced),
      },
    ),
  );
  bench.children.push(...mine);
  await Promise.all(mine.map((c) => waitForOutput(c, 'worker started')));
  // Warm-up (JIT, consumers), as for the workers in this process: fresh processes run their
  // first operations in V8's interpreter, which a long-running worker does not. Each process
  // compiles for itself, so each gets about WARM_UP (they share the queue).
  await submitAndWait(bench, d, sameTransfers(d, WARM_UP * CHILDREN));
  await sleep(1500);
  const dbBefore = await bench.pgStats();
  const pids = mine.map((c) => c.proc.pid as number);
  d.planeTimings.clear();
  const pBefore = snapshotCounter(d.planeCounter);
  const cpuBefore = cpuSample(pids);
  const result = await submitAndWait(bench, d, sameTransfers(d, OPS));
  const cpuAfter = cpuSample(pids);
  const postgresPids = await postgresPidsOf(admin, [name]);
  const pAfter = snapshotCounter(d.planeCounter);
  const span = await spanOf(bench.own, result.ids);
  printTimings('worker_processes control_plane', d.planeTimings, OPS);
  await Promise.all(mine.map((c) => stopChild(c)));
  await sleep(1500);
  const dbAfter = await bench.pgStats();
  const rawAfter = await bench.rawCommitRate(SECONDS);
  reportPhase({
    label: 'worker_processes',
    baselines: [rawBefore, rawAfter],
    n: OPS,
    result,
    span,
    db: { before: dbBefore, after: dbAfter },
    cpu: { before: cpuBefore, after: cpuAfter, postgresPids },
    counted: [{ label: 'control_plane', before: pBefore, after: pAfter }],
    note: `control plane in this process, ${CHILDREN} worker processes (opstate worker --kinds ${WORKER_KINDS}, concurrency ${perChild} each), after ${WARM_UP * CHILDREN} operations through them untimed (about ${WARM_UP} each)`,
  });
}

/** Control-plane loops of the memory run: every pass often, so 5 s see many of them. */
const MEMORY_TIMING: Partial<RuntimeTiming> = {
  schedulerIntervalMs: 50,
  relayIntervalMs: 50,
  monitorIntervalMs: 100,
  reconcilerIntervalMs: 200,
  leaderPollMs: 250,
};

/** Peak RSS of an `opstate control-plane` process over 5 s of passes, and its high-water mark. */
async function controlPlaneRss(
  bench: Bench,
  databaseUrl: string,
  prefix: string,
): Promise<{ rss: number; hwm: number }> {
  const child = spawnCli(['control-plane'], {
    DATABASE_URL: databaseUrl,
    NATS_URL,
    OPSTATE_PREFIX: prefix,
    OPSTATE_TIMING: JSON.stringify(MEMORY_TIMING),
  });
  bench.children.push(child);
  await waitForOutput(child, 'elected leader');
  const pid = child.proc.pid as number;
  let rss = 0;
  for (let i = 0; i < 10; i++) {
    await sleep(500);
    rss = Math.max(rss, rssKb(pid).rss);
  }
  const { hwm } = rssKb(pid);
  await stopChild(child);
  return { rss, hwm };
}

/**
 * Adds COMPLETED operations until `MEMORY_ROWS` are stored, 100,000 at a time, giving up when the
 * rest would take more than 5 minutes: how many are stored, how long it took, whether it gave up.
 */
async function fillMemoryRows(insertCopies: (count: number) => Promise<void>) {
  const fillStart = performance.now();
  const chunk = 100_000;
  let stored = 1000;
  let skipped = false;
  while (stored < MEMORY_ROWS) {
    const n = Math.min(chunk, MEMORY_ROWS - stored);
    await insertCopies(n);
    stored += n;
    const elapsed = (performance.now() - fillStart) / 1000;
    if ((elapsed / (stored - 1000)) * (MEMORY_ROWS - stored) > 300) {
      skipped = true;
      break;
    }
  }
  return { stored, skipped, fillSeconds: (performance.now() - fillStart) / 1000 };
}

/**
 * 5. Control-plane memory: RSS of an `opstate control-plane` process with 1,000 and then
 * MEMORY_ROWS COMPLETED operations stored (copies of one real row, made with SQL), in a database
 * of its own.
 */
async function memoryRun(bench: Bench): Promise<void> {
  const { admin, name, prefix } = bench;
  const [template] = await bench.own<{ row: unknown }>(
    `select to_jsonb(o) as row from operation o where status = 'COMPLETED' limit 1`,
  );
  const memName = `${name}_mem`;
  await admin.unsafe(`create database ${memName}`);
  const memUrl = new URL(ADMIN_URL);
  memUrl.pathname = `/${memName}`;
  const memPrefix = `${prefix}_mem`;
  bench.extraPrefixes.push(memPrefix);
  const memDb = await openDatabase({ databaseUrl: memUrl.toString(), max: 2 });
  try {
    await migrate(memDb);
    const insertCopies = async (count: number) => {
      await memDb.execute(
        `insert into operation (id, ${copiedColumns('')})
         select gen_random_uuid(), ${copiedColumns('t.')}
         from jsonb_populate_record(null::operation, '${JSON.stringify(template?.row).replaceAll("'", "''")}'::jsonb) t,
           generate_series(1, ${count}) g`,
      );
    };
    const measure = () => controlPlaneRss(bench, memUrl.toString(), memPrefix);
    await insertCopies(1000);
    await memDb.execute('vacuum analyze operation');
    const small = await measure();
    const { stored, skipped, fillSeconds } = await fillMemoryRows(insertCopies);
    if (skipped) {
      print({
        name: 'control_plane_memory_ratio',
        value: Number.NaN,
        unit: 'x',
        note: `skipped: filling ${MEMORY_ROWS} rows would take more than 5 minutes (${stored} in ${Math.round(fillSeconds)} s)`,
      });
    } else {
      await memDb.execute('vacuum analyze operation');
      const large = await measure();
      print({
        name: 'control_plane_rss_1k_stored',
        value: small.rss / 1024,
        unit: 'MiB',
        hwm_mib: Math.round(small.hwm / 102.4) / 10,
      });
      print({
        name: `control_plane_rss_${stored}_stored`,
        value: large.rss / 1024,
        unit: 'MiB',
        hwm_mib: Math.round(large.hwm / 102.4) / 10,
        fill_seconds: Math.round(fillSeconds),
      });
      print({
        name: 'control_plane_memory_ratio',
        value: large.rss / small.rss,
        unit: 'x',
        baseline: 1,
        note: `peak RSS of an opstate control-plane process over 5 s of loop passes (scheduler, relay, monitor, reconciler at 50–200 ms) with ${stored} vs 1,000 COMPLETED operations stored (base rows copied from a real one; no subtype or history rows); target ≤ 1.2`,
      });
    }
  } finally {
    await memDb.close();
    await admin.unsafe(`drop database if exists ${memName} with (force)`);
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const bench = await openBench();
  try {
    // 1. Baseline: raw single-row UPDATE by primary key, one commit each, 8 connections.
    await prepareRawCommitRate(bench.rawBench);
    const rawRate = await bench.rawCommitRate(SECONDS);
    print({
      name: 'raw_single_row_update',
      value: rawRate,
      unit: 'commits/s',
      note: 'postgres.js, 8 connections, UPDATE one row by primary key, one commit each; the e2e ratios use the mean of this rate measured just before and just after each run (the machine is shared)',
    });
    const d = await openDeployment(bench);
    // 2. e2e with the workers in this process: every transfer moves the same package to the same
    // place, so one completion creates its copy and the others find it there.
    await inProcessRun(bench, d, 'in_process', 'one package for all, its copy created once');
    if (DISTINCT) await distinctOutputRuns(bench, d);
    if (TRICKLE > 0) await trickleRun(bench, d);
    if (CHILDREN > 0) await workerProcessesRun(bench, d);
    if (MEMORY_ROWS > 0) await memoryRun(bench);
    print({
      name: 'e2e_bench_seconds',
      value: (performance.now() - started) / 1000,
      unit: 's',
    });
  } finally {
    await closeBench(bench);
  }
}

await main();
