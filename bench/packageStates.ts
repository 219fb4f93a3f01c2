/**
 * The cost of deriving package state, on the real Postgres: the counts per state over every
 * package (`countPackageStates`, what `opstate status` and the dashboard's /packages read) and one
 * package's facts (`selectPackage`, what `opstate inspect` and a package page read). Each is timed
 * at 1,000 raw data packages and again at 10,000 (the same database, grown), and printed as one
 * JSON line with the 1,000-package time as its baseline: the counts should grow with the packages
 * (ratio near 10), one package's read should not (ratio near 1). Then every statement of both
 * reads is run under EXPLAIN at 10,000 and one line says whether any plan scans a whole table.
 *
 *   node --import tsx bench/packageStates.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * OPSTATE_BENCH_PACKAGES (default 10000), OPSTATE_BENCH_REQUESTS (per read, default 10).
 */
import { randomBytes } from 'node:crypto';
import { type SQL, sql } from 'drizzle-orm';
import postgres from 'postgres';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { migrate } from '../persistence/migrate.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import { type Executor, openDatabase, type Row } from '../persistence/openDatabase.ts';
import { countPackageStates } from '../persistence/reads/countPackageStates.ts';
import { selectPackage } from '../persistence/reads/selectPackage.ts';
import { print } from './lib/figure.ts';

const ADMIN = process.env.OPSTATE_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TOTAL = Number(process.env.OPSTATE_BENCH_PACKAGES ?? 10_000);
const REQUESTS = Number(process.env.OPSTATE_BENCH_REQUESTS ?? 10);
const SMALL = 1_000;
const PER_BUNDLE = 10;

const name = `opstate_bench_pkg_${randomBytes(4).toString('hex')}`;
const admin = postgres(ADMIN, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${name}`);
const url = new URL(ADMIN);
url.pathname = `/${name}`;
const database = await openDatabase({ databaseUrl: url.toString() });

try {
  await migrate(database);
  const store = new OperationStore(database);
  const artifacts = new ArtifactRepository(database);
  const loc = (n: string, locationType: LocationType) =>
    artifacts.addLocation({ site: 'bench', name: n, locationType, storageRoot: `/data/${n}` });
  const source = await loc('source', LocationType.SOURCE);
  const buffer = await loc('buffer', LocationType.BUFFER);
  const archive = await loc('lta', LocationType.LONG_TERM_ARCHIVE);

  /**
   * Packages `from`..`to` in bundles of ten, each with its copy at the source and its packaging,
   * each bundle its transfer, every other package an archive.
   */
  const grow = async (from: number, to: number) => {
    const bundles = await database.execute(sql`
      insert into data_transfer_package (name)
      select 'dtp-' || n from generate_series(${from / PER_BUNDLE}::int, ${to / PER_BUNDLE - 1}::int) n
      returning id`);
    const packages = await database.execute(sql`
      insert into raw_data_package (name, data_transfer_package_id)
      select 'rdp-' || n, (${`{${bundles.map((b) => String(b.id)).join(',')}}`}::uuid[])[(n - ${from}::int) / ${PER_BUNDLE}::int + 1]
      from generate_series(${from}::int, ${to - 1}::int) n
      returning id, data_transfer_package_id as dtp`);
    // Each package's copy at the source, as packaging leaves it.
    await database.execute(sql`
      with c as (
        insert into physical_copy (artifact_type, artifact_id, location_id)
        select 'raw_data_package', id, ${source.id}::uuid
        from unnest(${`{${packages.map((p) => String(p.id)).join(',')}}`}::uuid[]) as id
        returning id, artifact_id)
      insert into raw_data_package_physical_copy (physical_copy_id, raw_data_package_id)
      select id, artifact_id from c`);
    const inputs: CreateOperationInput[] = [
      ...packages.map((p) => ({
        kind: OperationKind.RAW_DATA_PACKAGE,
        fields: { rawDataPackageId: String(p.id), locationId: source.id },
      })),
      ...packages
        .filter((_, n) => n % 2 === 0)
        .map((p) => ({
          kind: OperationKind.LONG_TERM_ARCHIVE,
          fields: {
            rawDataPackageId: String(p.id),
            sourceLocationId: buffer.id,
            destinationLocationId: archive.id,
          },
        })),
      ...bundles.map((b) => ({
        kind: OperationKind.TRANSFER,
        fields: {
          dataTransferPackageId: String(b.id),
          sourceLocationId: source.id,
          destinationLocationId: buffer.id,
        },
      })),
    ] as CreateOperationInput[];
    for (let i = 0; i < inputs.length; i += 2_000) {
      await store.createMany(inputs.slice(i, i + 2_000));
    }
    await database.execute('analyze');
    return String(packages[0]?.id);
  };

  const timeOf = async (fn: () => Promise<unknown>) => {
    await fn();
    const started = performance.now();
    for (let i = 0; i < REQUESTS; i++) await fn();
    return (performance.now() - started) / REQUESTS;
  };

  const one = await grow(0, SMALL);
  const countsSmall = await timeOf(() => countPackageStates(database));
  const oneSmall = await timeOf(() => selectPackage(database, one));
  await grow(SMALL, TOTAL);
  const countsLarge = await timeOf(() => countPackageStates(database));
  const oneLarge = await timeOf(() => selectPackage(database, one));
  print({
    name: 'package_state_counts_ms',
    value: countsLarge,
    unit: 'ms',
    baseline: countsSmall,
    note: `countPackageStates over ${TOTAL} raw data packages and ${TOTAL / PER_BUNDLE} transfer packages; baseline at ${SMALL}`,
  });
  print({
    name: 'package_facts_one_ms',
    value: oneLarge,
    unit: 'ms',
    baseline: oneSmall,
    note: `selectPackage of one raw data package at ${TOTAL} packages; baseline at ${SMALL}`,
  });

  // Every statement both reads send, under EXPLAIN: which plans scan a whole table.
  const plans: string[] = [];
  const explaining: Executor = {
    async execute<T extends Row = Row>(query: SQL | string): Promise<T[]> {
      const text = typeof query === 'string' ? sql.raw(query) : query;
      const [plan] = await database.execute(sql`explain (format json) ${text}`);
      plans.push(JSON.stringify(plan));
      return database.execute<T>(query);
    },
  };
  const scansOf = (from: number) =>
    plans
      .slice(from)
      .flatMap((p) =>
        [
          ...p.matchAll(
            /"Node Type":"Seq Scan","Parallel Aware":\w+,"Async Capable":\w+,"Relation Name":"(\w+)"/g,
          ),
        ].map((m) => m[1] as string),
      )
      .filter((r) => !['pipeline_cursor', 'flow_limit', 'data_location'].includes(r));
  await selectPackage(explaining, one);
  const onePlans = plans.length;
  const oneScans = scansOf(0);
  await countPackageStates(explaining);
  const countScans = scansOf(onePlans);
  for (const [label, scans, statements] of [
    ['selectPackage', oneScans, onePlans],
    ['countPackageStates', countScans, plans.length - onePlans],
  ] as const) {
    print({
      name: `package_state_seq_scans_${label}`,
      value: scans.length,
      unit: 'statements',
      note: `${label}: of ${statements} statements at ${TOTAL} packages, whole-table scans of: ${[...new Set(scans)].join(', ') || 'none'} (pipeline_cursor, flow_limit and data_location, a few rows each, left out)`,
    });
  }
} finally {
  await database.close();
  await admin.unsafe(`drop database ${name} with (force)`);
  await admin.end();
}
