/**
 * Persistence figures on the real Postgres. Prints one JSON object per line:
 * `{"name", "value", "unit"}`, and for compared figures `"baseline"` and `"ratio"` against the
 * raw single-row UPDATE rate of the same Postgres (postgres.js, 8 connections) measured in the
 * same run. Uses its own uniquely named database and drops it.
 *
 * The batched lifecycle runs twice: stagings that each produce a copy of their own package (the
 * per-stage rates and statement counts), then the end-to-end bench's workload, transfers that all
 * produce one package's one copy. Each run prints `lifecycle_batched_cpu_ms_per_op_<run>` with
 * its WAL per operation: the database work of the lifecycle alone, to set beside
 * `e2e_cpu_ms_per_op_in_process` and `e2e_wal_bytes_per_op_in_process`.
 *
 *   node --import tsx bench/persistence.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * OPSTATE_BENCH_OPS (operations in the batched pipeline, default 20000),
 * OPSTATE_BENCH_SECONDS (length of each timed loop, default 3), OPSTATE_BENCH_BATCH (default 100).
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { ArtifactType } from '../machines/ArtifactType.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { migrate } from '../persistence/migrate.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import { type Database, type Executor, openDatabase } from '../persistence/openDatabase.ts';
import { cpuMsPer, cpuSample, postgresPidsOf } from './lib/cpu.ts';
import { type Figure, print } from './lib/figure.ts';
import { prepareRawCommitRate, RAW_CONNECTIONS, rawCommitRate } from './lib/rawCommitRate.ts';
import { ADMIN_URL, envNumber } from './lib/settings.ts';

const OPS = envNumber('OPSTATE_BENCH_OPS', 20_000);
const SECONDS = envNumber('OPSTATE_BENCH_SECONDS', 3);
/** Callers of every stage: as many as the raw baseline's connections. */
const CONNECTIONS = RAW_CONNECTIONS;
const BATCH = envNumber('OPSTATE_BENCH_BATCH', 100);

/** Counts round trips: every execute is one statement, a transaction adds BEGIN and COMMIT. */
function counting(database: Database): { database: Database; count: () => number } {
  let n = 0;
  const wrap = (e: Executor): Executor => ({
    execute: (q) => {
      n++;
      return e.execute(q);
    },
  });
  const counted: Database = {
    ...database,
    execute: wrap(database).execute,
    transaction: (fn) => {
      n += 2;
      return database.transaction((tx) => fn(wrap(tx)));
    },
  };
  return { database: counted, count: () => n };
}

/** Runs `workers` loops for `seconds`; each call of `step` returns how many units it did. */
async function timed(workers: number, seconds: number, step: (w: number) => Promise<number>) {
  const deadline = performance.now() + seconds * 1000;
  const start = performance.now();
  let units = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (performance.now() < deadline) {
        const n = await step(w);
        if (n === 0) return;
        units += n;
      }
    }),
  );
  return units / ((performance.now() - start) / 1000);
}

/** Runs `workers` loops until `step` returns 0 everywhere; units per second. */
async function untilDone(workers: number, step: (w: number) => Promise<number>) {
  const start = performance.now();
  let units = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (;;) {
        const n = await step(w);
        if (n === 0) return;
        units += n;
      }
    }),
  );
  return { units, perSecond: units / ((performance.now() - start) / 1000) };
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Called once the operations have started, before they complete: returns the copies each
 * operation reports (it may read what the run created).
 */
type Outputs = (store: OperationStore) => Promise<(id: string) => OutputCopy[]>;

/** START for every claimed operation, in batches by `CONNECTIONS` callers. */
function startAll(store: OperationStore, claimed: readonly { id: string; attempt: number }[]) {
  const startBatches = chunks(claimed, BATCH);
  return untilDone(CONNECTIONS, async (w) => {
    const batch = startBatches.pop();
    if (batch === undefined) return 0;
    const results = await store.applyMany(
      batch.map((c) => ({
        id: c.id,
        event: { type: 'START' as const, attempt: c.attempt, workerId: `w${w}` },
      })),
    );
    return results.filter((r) => r.ok).length;
  });
}

/** COMPLETE with its copies for every started operation, in batches by `CONNECTIONS` callers. */
function completeAll(
  store: OperationStore,
  claimed: readonly { id: string; attempt: number }[],
  outputsOf: (id: string) => OutputCopy[],
) {
  const completeBatches = chunks(claimed, BATCH);
  return untilDone(CONNECTIONS, async () => {
    const batch = completeBatches.pop();
    if (batch === undefined) return 0;
    const results = await store.completeMany(
      batch.map((c) => ({ id: c.id, attempt: c.attempt, outputs: outputsOf(c.id) })),
    );
    return results.filter((r) => r.ok).length;
  });
}

/**
 * Drives `inputs` through the whole lifecycle in batches of `BATCH`, by `CONNECTIONS` callers,
 * one stage after the other: create, claim (PENDING → SCHEDULED, the dispatch in its transition), START,
 * complete with `outputs`, then the relay's read of the dispatches past its cursor. Returns each stage's rate
 * and statements per operation, and prints `lifecycle_batched_cpu_ms_per_op_<label>`: what
 * those rows cost with no broker, no worker and no heartbeat in the way.
 */
async function batchedLifecycle(run: {
  admin: postgres.Sql;
  name: string;
  store: OperationStore;
  count: () => number;
  inputs: readonly CreateOperationInput[];
  outputs: Outputs;
  label: string;
}) {
  const { admin, store, count, inputs } = run;
  const n = inputs.length;
  const walLsn = async () => {
    const [row] = await admin.unsafe(`select (pg_current_wal_lsn() - '0/0')::bigint as wal`);
    return Number(row?.wal);
  };
  const wal0 = await walLsn();
  const cpu0 = cpuSample();
  const s0 = count();

  const createBatches = chunks(inputs, BATCH);
  const create = await untilDone(CONNECTIONS, async () => {
    const batch = createBatches.pop();
    if (batch === undefined) return 0;
    return (await store.createMany(batch)).length;
  });
  const s1 = count();

  const claimed: { id: string; attempt: number }[] = [];
  const claim = await untilDone(CONNECTIONS, async () => {
    const { claimed: got } = await store.claimDue(BATCH);
    claimed.push(...got);
    return got.length;
  });
  const s2 = count();

  const start = await startAll(store, claimed);
  const s3 = count();

  const outputsOf = await run.outputs(store);
  const s3b = count();
  const complete = await completeAll(store, claimed, outputsOf);
  const s4 = count();

  // The relay's pass, as the control plane runs it once everything is old enough: the barrier,
  // the dispatches past the cursor, the cursor moved past them.
  const relay = await untilDone(1, async () => {
    const { after } = await store.relayPosition();
    const upTo = await store.dispatchBarrier();
    if (upTo === undefined) throw new Error('a dispatch write is open after every stage finished');
    const entries = await store.fetchDispatches(after, upTo, 500);
    const last = entries[entries.length - 1];
    if (last !== undefined) await store.saveRelayCursor(last.id);
    return entries.length;
  });
  const s5 = count();
  const cpu1 = cpuSample();
  const wal1 = await walLsn();

  if (complete.units !== n || relay.units !== n) {
    throw new Error(
      `lifecycle ${run.label}: ${complete.units} of ${n} completed, ${relay.units} dispatches relayed`,
    );
  }
  // Asked now: postgres.js opens its connections on first use, so some backends are new.
  const cpu = cpuMsPer(cpu0, cpu1, n, await postgresPidsOf(admin, [run.name]));
  const rates = {
    create: create.perSecond,
    claim: claim.perSecond,
    start: start.perSecond,
    complete: complete.perSecond,
    relay: relay.perSecond,
  };
  const secondsPerOp = Object.values(rates).reduce((sum, rate) => sum + 1 / rate, 0);
  print({
    name: `lifecycle_batched_cpu_ms_per_op_${run.label}`,
    value: cpu.total,
    unit: 'cpu ms/op',
    note: `${n} operations through the five batched stages (create, claim, START, complete with its copies, the relay's read of the dispatches and its cursor), ${BATCH} per call, ${CONNECTIONS} callers, one stage after the other: no broker, no worker, no heartbeat. CPU time (user+system) of this process and of the bench database's Postgres backends plus the server's WAL writer, checkpointer and background writer, from /proc, ÷ operations: what the lifecycle's rows cost on their own. Its Postgres part is the floor of the end-to-end figure's Postgres part: only a change to the data model lowers it. stages_ops_per_s: the rate of the five stages run back to back`,
    bench_process: cpu.bench_process,
    postgres: cpu.postgres,
    wal_bytes_per_op: Math.round((wal1 - wal0) / n),
    stages_ops_per_s: Math.round(1 / secondsPerOp),
  });
  const per = (statements: number) => statements / n;
  return {
    rates,
    statementsPerOp: {
      create: per(s1 - s0),
      claim: per(s2 - s1),
      start: per(s3 - s2),
      complete: per(s4 - s3b),
      lifecycle: per(s5 - s0 - (s3b - s3)),
    },
  };
}

/** The unbatched forms, one operation per call, `CONNECTIONS` concurrent callers. */
async function unbatchedRuns(
  opened: Database,
  database: Database,
  count: () => number,
  rest: readonly string[],
  input: (pkg: string) => CreateOperationInput,
  vs: (f: Pick<Figure, 'name' | 'value' | 'unit'>) => void,
): Promise<void> {
  const single = new OperationStore(database);
  let r = 0;
  const createOne = await timed(CONNECTIONS, SECONDS, async () => {
    const pkg = rest[r++];
    if (pkg === undefined) return 0;
    await single.create(input(pkg));
    return 1;
  });
  vs({ name: 'create_single', value: createOne, unit: 'ops/s' });

  const pending = (
    await opened.execute<{ id: string }>(
      `select id from operation where status = 'PENDING' order by created_at`,
    )
  ).map((x) => String(x.id));
  let p = 0;
  const c6 = count();
  const applyOne = await timed(CONNECTIONS, SECONDS, async () => {
    const id = pending[p++];
    if (id === undefined) return 0;
    await single.apply(id, { type: 'SCHEDULE' });
    return 1;
  });
  const applied = Math.min(p, pending.length);
  vs({ name: 'apply_single', value: applyOne, unit: 'applies/s' });
  print({
    name: 'statements_per_op_apply_single',
    value: applied === 0 ? 0 : (count() - c6) / applied,
    unit: 'statements/op',
  });
}

/** The end-to-end bench's workload: transfers that all produce one package's one copy. */
async function sameCopyRun(
  artifacts: ArtifactRepository,
  sourceId: string,
  lifecycle: (
    label: string,
    inputs: readonly CreateOperationInput[],
    outputs: Outputs,
  ) => Promise<unknown>,
): Promise<void> {
  const buffer = await artifacts.addLocation({
    site: 'b',
    name: 'buffer',
    locationType: LocationType.BUFFER,
    storageRoot: '/b',
  });
  const dtp = await artifacts.addDataTransferPackage({ name: 'dtp' });
  const transfer: CreateOperationInput = {
    kind: OperationKind.TRANSFER,
    fields: {
      dataTransferPackageId: dtp,
      sourceLocationId: sourceId,
      destinationLocationId: buffer.id,
    },
  };
  await lifecycle(
    'same_copy',
    Array.from({ length: OPS }, () => transfer),
    async () => () => [
      {
        artifactType: ArtifactType.DATA_TRANSFER_PACKAGE,
        artifactId: dtp,
        locationId: buffer.id,
      },
    ],
  );
}

async function main(): Promise<void> {
  const name = `opstate_bench_${randomBytes(5).toString('hex')}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const raw = postgres(url.toString(), { max: CONNECTIONS, onnotice: () => {} });
  const opened = await openDatabase({ databaseUrl: url.toString(), max: CONNECTIONS });
  try {
    await migrate(opened);

    // Baseline: raw single-row UPDATE by primary key, one commit each, 8 connections.
    await prepareRawCommitRate(raw);
    const rawUpdate = await rawCommitRate(raw, SECONDS);
    print({ name: 'raw_single_row_update', value: rawUpdate, unit: 'rows/s' });
    const vs = (f: Pick<Figure, 'name' | 'value' | 'unit'>) => print({ ...f, baseline: rawUpdate });

    // A world: locations and one raw data package per operation (distinct output copies).
    const artifacts = new ArtifactRepository(opened);
    const source = await artifacts.addLocation({
      site: 'b',
      name: 'src',
      locationType: LocationType.SOURCE,
      storageRoot: '/s',
    });
    // Staging (a package copy from one location to another): the lifecycle's rows alone. A
    // long-term archive would add its archive protocol (files and record rows) to every one.
    const lta = await artifacts.addLocation({
      site: 'b',
      name: 'processing',
      locationType: LocationType.PROCESSING,
      storageRoot: '/l',
    });
    const total = OPS + CONNECTIONS * 2000;
    const pkgs = (
      await opened.execute<{ id: string }>(
        `insert into raw_data_package (name) select 'p' || g from generate_series(1, ${total}) g returning id`,
      )
    ).map((r) => String(r.id));
    const input = (pkg: string): CreateOperationInput<OperationKind.STAGING> => ({
      kind: OperationKind.STAGING,
      fields: { rawDataPackageId: pkg, sourceLocationId: source.id, destinationLocationId: lta.id },
    });

    // Batched hot path, every statement counted: one staging per package, as in a pipeline.
    const { database, count } = counting(opened);
    const store = new OperationStore(database);
    const lifecycle = (label: string, inputs: readonly CreateOperationInput[], outputs: Outputs) =>
      batchedLifecycle({ admin, name, store, count, inputs, outputs, label });
    const pipeline = pkgs.slice(0, OPS);
    const distinct = await lifecycle('distinct_copies', pipeline.map(input), async (s) => {
      const rows = await s.database.execute<{ operation_id: string; raw_data_package_id: string }>(
        'select operation_id, raw_data_package_id from staging_operation',
      );
      const packageOf = new Map(
        rows.map((r) => [String(r.operation_id), String(r.raw_data_package_id)]),
      );
      return (id) => [
        {
          artifactType: ArtifactType.RAW_DATA_PACKAGE,
          artifactId: packageOf.get(id) as string,
          locationId: lta.id,
        },
      ];
    });
    vs({ name: 'create_batched', value: distinct.rates.create, unit: 'ops/s' });
    vs({ name: 'claim_due_batched', value: distinct.rates.claim, unit: 'ops/s' });
    vs({ name: 'apply_many_start', value: distinct.rates.start, unit: 'applies/s' });
    vs({ name: 'complete_many_with_copy', value: distinct.rates.complete, unit: 'ops/s' });
    vs({ name: 'dispatch_relay_read', value: distinct.rates.relay, unit: 'rows/s' });
    for (const [stage, n] of Object.entries(distinct.statementsPerOp)) {
      print({ name: `statements_per_op_${stage}_batched`, value: n, unit: 'statements/op' });
    }

    await sameCopyRun(artifacts, source.id, lifecycle);

    await unbatchedRuns(opened, database, count, pkgs.slice(OPS), input, vs);

    const [size] = await opened.execute<{ n: number }>(
      'select max(octet_length(snapshot::text))::int as n from operation',
    );
    print({ name: 'snapshot_size_max', value: Number(size?.n), unit: 'bytes' });
  } finally {
    await opened.close();
    await raw.end({ timeout: 5 });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end({ timeout: 5 });
  }
}

await main();
