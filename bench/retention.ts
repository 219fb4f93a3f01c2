/**
 * What pruning a partition of the transition history, and a span of the step journal, costs
 * against deleting the same rows, in the same run on the real Postgres. Prints one JSON object per line:
 * - `retention_prune_ms`: one `opstate_history_prune` call dropping a whole partition of
 *   OPSTATE_BENCH_RETENTION_ROWS old transitions (default 2,000,000: about a year of a pipeline
 *   writing 5,500 operations a day), with 1,000 live operations elsewhere whose histories it
 *   probes, against the baseline `DELETE … WHERE id BETWEEN …` of an identical partition's rows;
 * - `retention_prune_wal_bytes`: the WAL each wrote (counted, so comparable across machines);
 * - `retention_writer_stall_ms`: the longest a writer creating and cancelling operations in a
 *   loop waited for one of them while the prune ran, against the longest in an equal window
 *   after it (the prune locks the history, and operation against writes, for its drop alone;
 *   its reads of the partition take no lock writers wait on).
 * - `retention_journal_prune_ms`, `retention_journal_prune_wal_bytes`,
 *   `retention_journal_writer_stall_ms`: the same for one `opstate_journal_prune` call dropping a
 *   span of the step journal and failure breadcrumbs (OPSTATE_BENCH_RETENTION_STEPS steps, default
 *   660,000: 30 days of 5,500 operations a day, four steps each, and a breadcrumb for one in ten),
 *   against deleting an identical span's rows, on a database of its own.
 *
 *   node --import tsx bench/retention.ts      # or: npm run bench -- retention
 *
 * Env: OPSTATE_BENCH_RETENTION_ROWS, OPSTATE_BENCH_RETENTION_STEPS (0 skips either part),
 * OPSTATE_BENCH_ADMIN_URL.
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
import { measureJournalPrune } from './lib/journalPrune.ts';
import { pruneBesideWriter, startWriter, timed, walLsn, walSince } from './lib/pruneWriter.ts';
import { envNumber } from './lib/settings.ts';

const ROWS = envNumber('OPSTATE_BENCH_RETENTION_ROWS', 2_000_000);
// A 30-day span of a pipeline creating 5,500 operations a day, four steps each.
const STEPS = envNumber('OPSTATE_BENCH_RETENTION_STEPS', 660_000);
const LIVE = 1_000;
const DAY = 86_400_000;
const { say } = benchLog('retention');

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
  await retention.set({ keepMs: 400 * DAY, partitionIds: Math.max(ROWS, 1000), by: 'bench' });
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

/** One prune call (it drops the oldest partition it may, the first, and stops), with a writer. */
async function measurePrune(setup: Setup, first: number) {
  const { db } = setup;
  const writer = await startWriter(setup.store, setup.input);
  const prune = await pruneBesideWriter(db, writer, () =>
    db.execute('select * from opstate_history_prune()'),
  );
  const dropped = prune.result.filter((d) => d.dropped === true);
  if (
    dropped.length !== 1 ||
    Number(dropped[0]?.lower_id) !== first ||
    Number(dropped[0]?.rows_in) !== ROWS
  ) {
    throw new Error(
      `the prune did not drop the partition of ${ROWS} rows: ${JSON.stringify(prune.result)}`,
    );
  }
  return prune;
}

/** The history's part: one partition of ROWS transitions pruned, against deleting another. */
async function measureHistory(dbs: ReturnType<typeof benchDatabases>): Promise<void> {
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
  }
}

/** The journal's part, on a database of its own. */
async function measureJournal(dbs: ReturnType<typeof benchDatabases>): Promise<void> {
  const url = await dbs.create(`bench_retention_journal_${process.pid}`);
  const db = await openDatabase({ databaseUrl: url, max: 4 });
  try {
    const { store, input } = await setUp(db);
    await measureJournalPrune({ db, store, input, steps: STEPS, say });
  } finally {
    await db.close();
  }
}

async function main(): Promise<void> {
  const dbs = benchDatabases();
  try {
    if (ROWS > 0) await measureHistory(dbs);
    if (STEPS > 0) await measureJournal(dbs);
  } finally {
    await dbs.dropAll();
  }
}

await main();
