/**
 * Persistence figures on the real Postgres. Prints one JSON object per line:
 * `{"name", "value", "unit"}`, and for compared figures `"baseline"` and `"ratio"` against the
 * raw single-row UPDATE rate of the same Postgres (postgres.js, 8 connections) measured in the
 * same run. Uses its own uniquely named database and drops it.
 *
 *   node --import tsx bench/persistence.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * OPSTATE_BENCH_OPS (operations in the batched pipeline, default 20000),
 * OPSTATE_BENCH_SECONDS (length of each timed loop, default 3), OPSTATE_BENCH_BATCH (default 100).
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import { migrate } from '../persistence/migrate.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import { type Database, type Executor, openDatabase } from '../persistence/openDatabase.ts';
import { type Figure, print } from './lib/figure.ts';

const ADMIN = process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const OPS = Number(process.env.OPSTATE_BENCH_OPS ?? 20_000);
const SECONDS = Number(process.env.OPSTATE_BENCH_SECONDS ?? 3);
const CONNECTIONS = 8;
const BATCH = Number(process.env.OPSTATE_BENCH_BATCH ?? 100);

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

async function main(): Promise<void> {
  const name = `opstate_bench_${randomBytes(5).toString('hex')}`;
  const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const raw = postgres(url.toString(), { max: CONNECTIONS, onnotice: () => {} });
  const opened = await openDatabase({ databaseUrl: url.toString(), max: CONNECTIONS });
  try {
    await migrate(opened);

    // Baseline: raw single-row UPDATE by primary key, one commit each, 8 connections.
    await raw.unsafe('create table bench_raw (id int primary key, n int not null)');
    await raw.unsafe('insert into bench_raw select g, 0 from generate_series(0, 1023) g');
    let next = 0;
    const rawUpdate = await timed(CONNECTIONS, SECONDS, async () => {
      await raw`update bench_raw set n = n + 1 where id = ${next++ % 1024}`;
      return 1;
    });
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
    const lta = await artifacts.addLocation({
      site: 'b',
      name: 'lta',
      locationType: LocationType.LONG_TERM_ARCHIVE,
      storageRoot: '/l',
    });
    const total = OPS + CONNECTIONS * 2000;
    const pkgs = (
      await opened.execute<{ id: string }>(
        `insert into raw_data_package (name) select 'p' || g from generate_series(1, ${total}) g returning id`,
      )
    ).map((r) => String(r.id));
    const input = (pkg: string) => ({
      kind: OperationKind.LONG_TERM_ARCHIVE,
      fields: { rawDataPackageId: pkg, sourceLocationId: source.id, destinationLocationId: lta.id },
    });

    // Batched hot path, every statement counted.
    const { database, count } = counting(opened);
    const store = new OperationStore(database);
    const pipeline = pkgs.slice(0, OPS);
    const createBatches = chunks(pipeline, BATCH);
    const created: string[] = [];
    const c0 = count();
    const create = await untilDone(CONNECTIONS, async () => {
      const batch = createBatches.pop();
      if (batch === undefined) return 0;
      created.push(...(await store.createMany(batch.map(input))));
      return batch.length;
    });
    const c1 = count();
    vs({ name: 'create_batched', value: create.perSecond, unit: 'ops/s' });

    const claimed: { id: string; attempt: number }[] = [];
    const claim = await untilDone(CONNECTIONS, async () => {
      const { claimed: got } = await store.claimDue(BATCH);
      claimed.push(...got);
      return got.length;
    });
    const c2 = count();
    vs({ name: 'claim_due_batched', value: claim.perSecond, unit: 'ops/s' });

    const startBatches = chunks(claimed, BATCH);
    const start = await untilDone(CONNECTIONS, async (w) => {
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
    const c3 = count();
    vs({ name: 'apply_many_start', value: start.perSecond, unit: 'applies/s' });

    const pkgOf = new Map(created.map((id, n) => [id, pipeline[n] as string]));
    // createMany returns ids in insert order, batch by batch; map each op to its package by loading.
    const records = await opened.execute<{ operation_id: string; raw_data_package_id: string }>(
      'select operation_id, raw_data_package_id from long_term_archive_operation',
    );
    for (const r of records) pkgOf.set(String(r.operation_id), String(r.raw_data_package_id));
    const completeBatches = chunks(claimed, BATCH);
    const c3b = count();
    const complete = await untilDone(CONNECTIONS, async () => {
      const batch = completeBatches.pop();
      if (batch === undefined) return 0;
      const results = await store.completeMany(
        batch.map((c) => ({
          id: c.id,
          attempt: c.attempt,
          outputs: [
            {
              artifactType: 'raw_data_package' as const,
              artifactId: pkgOf.get(c.id) as string,
              locationId: lta.id,
            },
          ],
        })),
      );
      return results.filter((r) => r.ok).length;
    });
    const c4 = count();
    vs({ name: 'complete_many_with_copy', value: complete.perSecond, unit: 'ops/s' });

    const relay = await untilDone(1, async () => {
      const entries = await store.fetchOutbox(500);
      return store.deleteOutbox(entries.map((e) => e.id));
    });
    const c5 = count();
    vs({ name: 'outbox_fetch_delete', value: relay.perSecond, unit: 'rows/s' });

    const per = (n: number) => n / OPS;
    print({ name: 'statements_per_op_create_batched', value: per(c1 - c0), unit: 'statements/op' });
    print({ name: 'statements_per_op_claim_batched', value: per(c2 - c1), unit: 'statements/op' });
    print({ name: 'statements_per_op_start_batched', value: per(c3 - c2), unit: 'statements/op' });
    print({
      name: 'statements_per_op_complete_batched',
      value: per(c4 - c3b),
      unit: 'statements/op',
    });
    print({
      name: 'statements_per_op_lifecycle_batched',
      value: per(c1 - c0 + (c2 - c1) + (c3 - c2) + (c4 - c3b) + (c5 - c4)),
      unit: 'statements/op',
    });

    // Unbatched forms, one operation per call, 8 concurrent callers.
    const single = new OperationStore(database);
    const rest = pkgs.slice(OPS);
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
