/**
 * What pruning a partition of the transition history costs, against deleting the same rows, in
 * the same run on the real Postgres. Prints one JSON object per line:
 * - `retention_prune_ms`: one `opstate_history_prune` call dropping a whole partition of
 *   OPSTATE_BENCH_RETENTION_ROWS old transitions (default 2,000,000: about a year of a pipeline
 *   writing 5,500 operations a day), with 1,000 live operations elsewhere whose histories it
 *   probes, against the baseline `DELETE … WHERE id BETWEEN …` of an identical partition's rows;
 * - `retention_prune_wal_bytes`: the WAL each wrote (counted, so comparable across machines);
 * - `retention_writer_stall_ms`: the longest a writer creating and cancelling operations in a
 *   loop waited for one of them while the prune ran, against the longest in an equal window
 *   after it (the prune locks the history, and operation against writes, for its drop alone;
 *   its reads of the partition take no lock writers wait on).
 *
 *   node --import tsx bench/retention.ts      # or: npm run bench -- retention
 *
 * Env: OPSTATE_BENCH_RETENTION_ROWS, OPSTATE_BENCH_ADMIN_URL.
 */
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { HistoryRetentionRepository } from '../persistence/HistoryRetention.ts';
import { migrate } from '../persistence/migrate.ts';
import { OperationStore } from '../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../persistence/openDatabase.ts';
import { benchDatabases, benchLog } from './lib/benchDatabases.ts';
import { print } from './lib/figure.ts';
import { envNumber } from './lib/settings.ts';

const ROWS = envNumber('OPSTATE_BENCH_RETENTION_ROWS', 2_000_000);
const LIVE = 1_000;
const DAY = 86_400_000;
const { say } = benchLog('retention');

async function walLsn(db: Database): Promise<string> {
  const [r] = await db.execute<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
  return String(r?.lsn);
}

async function walSince(db: Database, lsn: string): Promise<number> {
  const [r] = await db.execute<{ b: string }>(
    `select pg_wal_lsn_diff(pg_current_wal_lsn(), '${lsn}')::bigint as b`,
  );
  return Number(r?.b);
}

/** Times `fn` in milliseconds. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** The bench's database: its policy, one location and a maker of fresh create requests. */
interface Setup {
  readonly db: Database;
  readonly retention: HistoryRetentionRepository;
  readonly store: OperationStore;
  readonly input: () => Promise<CreateOperationInput>;
}

async function setUp(db: Database): Promise<Setup> {
  await migrate(db);
  const retention = new HistoryRetentionRepository(db);
  await retention.set({ keepMs: 400 * DAY, partitionIds: ROWS, by: 'bench' });
  const artifacts = new ArtifactRepository(db);
  const source = await artifacts.addLocation({
    site: `bench-${process.pid}`,
    name: 'source',
    locationType: LocationType.SOURCE,
    storageRoot: '/data/source',
  });
  const input = async (): Promise<CreateOperationInput> => ({
    kind: OperationKind.RAW_DATA_PACKAGE,
    fields: {
      rawDataPackageId: await artifacts.addRawDataPackage({
        name: `rdp-${Math.random()}`,
        dataTransferPackageId: await artifacts.addDataTransferPackage({
          name: `dtp-${Math.random()}`,
        }),
      }),
      locationId: source.id,
    },
  });
  return { db, retention, store: new OperationStore(db), input };
}

/**
 * Two partitions of ROWS old transitions each (one for the prune, one for the delete), of one
 * operation finished long ago, then LIVE live operations elsewhere and the relay past them all.
 * Returns the first partition's lowest id.
 */
async function fill({ db, retention, store, input }: Setup): Promise<number> {
  const old = await store.create(await input());
  await store.apply(old, { type: 'CANCEL', reason: 'bench' }, { by: 'operator' });
  const [top] = await db.execute<{ top: string }>(
    'select max(upper_id) as top from opstate_history_partitions() where not is_default',
  );
  const first = Number(top?.top);
  await db.execute(`select setval('operation_transition_id_seq', ${first}, false)`);
  await retention.extend();
  // The empty partitions the migration made go first, so the timed call drops the full one.
  await retention.prune();
  for (const lower of [first, first + ROWS]) {
    say(`filling ids ${lower}–${lower + ROWS - 1}`);
    await db.execute(`select setval('operation_transition_id_seq', ${lower}, false)`);
    for (let done = 0; done < ROWS; done += 500_000) {
      const n = Math.min(500_000, ROWS - done);
      await db.execute(`
        insert into operation_transition (operation_id, from_status, to_status, event, attempt, by, at)
        select '${old}', 'PENDING', 'SCHEDULED', 'SCHEDULE', 1, 'bench',
               now() - interval '500 days' + make_interval(secs => g)
          from generate_series(${done + 1}, ${done + n}) g`);
    }
    await retention.extend();
  }
  await db.execute(`select setval('operation_transition_id_seq', ${first + 2 * ROWS}, false)`);
  await retention.extend();
  // Live operations elsewhere: the prune probes each one's history in the partition.
  for (let i = 0; i < LIVE; i++) await store.create(await input());
  await db.execute(
    `insert into dispatch_relay_cursor (id, after_id) values (1, ${first + 2 * ROWS})
     on conflict (id) do update set after_id = excluded.after_id`,
  );
  await db.execute('vacuum analyze operation_transition');
  return first;
}

/**
 * A writer creating and cancelling operations until stopped, each step's span kept: the longest
 * span overlapping a window is what a writer waited in it, whenever the span ended.
 */
async function startWriter({ store, input }: Setup) {
  const spans: [number, number][] = [];
  let writing = true;
  const ready = await Promise.all(Array.from({ length: 64 }, () => input()));
  const done = (async () => {
    let i = 0;
    while (writing) {
      const t0 = performance.now();
      const id = await store.create(ready[i++ % ready.length] as CreateOperationInput);
      await store.apply(id, { type: 'CANCEL', reason: 'bench' }, { by: 'operator' });
      spans.push([t0, performance.now()]);
    }
  })();
  return {
    longestIn: (from: number, to: number) =>
      Math.max(0, ...spans.filter(([a, b]) => b >= from && a <= to).map(([a, b]) => b - a)),
    stop: async () => {
      writing = false;
      await done;
    },
  };
}

/** One prune call (it drops the oldest partition it may, the first, and stops), with a writer. */
async function measurePrune(setup: Setup, first: number) {
  const { db } = setup;
  const writer = await startWriter(setup);
  await new Promise((r) => setTimeout(r, 500));
  const walAt = await walLsn(db);
  const from = performance.now();
  const pruned = await db.execute('select * from opstate_history_prune()');
  const to = performance.now();
  const wal = await walSince(db, walAt);
  // The baseline: the same writer alone, for as long (at least 2 s).
  await new Promise((r) => setTimeout(r, Math.max(to - from, 2000)));
  await writer.stop();
  const dropped = pruned.filter((d) => d.dropped === true);
  if (
    dropped.length !== 1 ||
    Number(dropped[0]?.lower_id) !== first ||
    Number(dropped[0]?.rows_in) !== ROWS
  ) {
    throw new Error(
      `the prune did not drop the partition of ${ROWS} rows: ${JSON.stringify(pruned)}`,
    );
  }
  return {
    ms: to - from,
    wal,
    stall: writer.longestIn(from, to),
    quietStall: writer.longestIn(to + 200, performance.now()),
  };
}

async function main(): Promise<void> {
  const dbs = benchDatabases();
  const url = await dbs.create(`bench_retention_${process.pid}`);
  const db = await openDatabase({ databaseUrl: url, max: 4 });
  try {
    const setup = await setUp(db);
    const first = await fill(setup);
    const prune = await measurePrune(setup, first);
    const walAt = await walLsn(db);
    const deleteMs = await timed(() =>
      db.execute(
        `delete from operation_transition where id >= ${first + ROWS} and id < ${first + 2 * ROWS}`,
      ),
    );
    const deleteWal = await walSince(db, walAt);

    const note = `${ROWS} rows in the partition, ${LIVE} live operations probed`;
    print({ name: 'retention_prune_ms', value: prune.ms, unit: 'ms', baseline: deleteMs, note });
    print({
      name: 'retention_prune_wal_bytes',
      value: prune.wal,
      unit: 'B',
      baseline: deleteWal,
      note: "dropping the partition (the window holds the writer's WAL too) against deleting its rows",
    });
    print({
      name: 'retention_writer_stall_ms',
      value: prune.stall,
      unit: 'ms',
      baseline: prune.quietStall,
      note: 'the longest create + cancel during the prune, against the same writer after it',
    });
  } finally {
    await db.close();
    await dbs.dropAll();
  }
}

await main();
