import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import type { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { print } from './figure.ts';
import { pruneBesideWriter, startWriter, timed, walLsn, walSince } from './pruneWriter.ts';

const DAY = 86_400_000;
const STEPS_PER_OPERATION = 4;
/** One failure breadcrumb per this many operations. */
const FAILED_EVERY = 10;

/** What the journal's part of the bench is given: a migrated database under a 400-day policy. */
export interface JournalBench {
  readonly db: Database;
  readonly store: OperationStore;
  readonly input: () => Promise<CreateOperationInput>;
  readonly steps: number;
  readonly say: (line: string) => void;
}

const floorOf = (t: Date) => `opstate_uuid_floor('${t.toISOString()}'::timestamptz)`;
/** A span's suffix as `opstate_journal_extend` names it: `j` and its first day (UTC). */
const suffixOf = (t: Date) => `j${t.toISOString().slice(0, 10).replaceAll('-', '')}`;

/**
 * The journal a deployment 500 days old would have: in place of the first span, two old spans of
 * 15 days (A to prune, B for the baseline's delete) and one from their end to where the first span
 * ended (it holds the writer's operations), made and attached as `opstate_journal_extend` makes
 * them. Returns the spans' bounds.
 */
async function reshapeSpans(db: Database, now: number) {
  const [j0] = await db.execute<{ upper: string }>(
    `select upper_id::text as upper from opstate_journal_partitions() where suffix = 'j0'`,
  );
  const a = new Date(now - 500 * DAY);
  const b = new Date(now - 485 * DAY);
  const c = new Date(now - 470 * DAY);
  for (const table of ['operation_step', 'operation_failure_event']) {
    await db.execute(`alter table ${table} detach partition ${table}_j0`);
    await db.execute(`drop table ${table}_j0`);
    const spans: [string, string, string][] = [
      [suffixOf(a), floorOf(a), floorOf(b)],
      [suffixOf(b), floorOf(b), floorOf(c)],
      [suffixOf(c), floorOf(c), `'${j0?.upper}'::uuid`],
    ];
    for (const [suffix, lower, upper] of spans) {
      await db.execute(
        `create table ${table}_${suffix} (like ${table} including defaults including constraints)`,
      );
      await db.execute(
        `alter table ${table} attach partition ${table}_${suffix} for values from (${lower}) to (${upper})`,
      );
    }
  }
  return { a, b, c };
}

/**
 * Fills the span from `from` (15 days) with `steps` steps of finished operations created then,
 * four per operation, and a failure breadcrumb for one in ten; the operations are copies of a
 * cancelled one with ids of their creation times.
 */
async function fillSpan(bench: JournalBench, template: string, from: Date) {
  const { db, steps } = bench;
  const ops = Math.ceil(steps / STEPS_PER_OPERATION);
  const gapMs = Math.floor((15 * DAY) / ops);
  const at = (g: string) =>
    `'${from.toISOString()}'::timestamptz + ${g} * ${gapMs} * interval '1 ms'`;
  await db.execute(`
    insert into operation
    select r.* from operation t, generate_series(0, ${ops - 1}) g,
      lateral jsonb_populate_record(null::operation, to_jsonb(t) || jsonb_build_object(
        'id', opstate_uuid_floor(${at('g')}), 'created_at', ${at('g')},
        'status_changed_at', ${at('g')} + interval '1 minute',
        'finished_at', ${at('g')} + interval '1 minute')) r
     where t.id = '${template}'`);
  await db.execute(`
    insert into operation_step (operation_id, attempt, name, state, result, at)
    select opstate_uuid_floor(${at(`(g / ${STEPS_PER_OPERATION})`)}), 1,
           'step-' || (g % ${STEPS_PER_OPERATION}), 'done', '{"etag":"bench"}'::jsonb,
           ${at(`(g / ${STEPS_PER_OPERATION})`)} + (g % ${STEPS_PER_OPERATION}) * interval '1 s'
      from generate_series(0, ${steps - 1}) g`);
  await db.execute(`
    insert into operation_failure_event (kind, operation_id, attempt, error, at)
    select 'raw_data_package', opstate_uuid_floor(${at('g')}), 1,
           '{"code":"TRANSIENT","message":"bench"}'::jsonb, ${at('g')} + interval '30 s'
      from generate_series(0, ${ops - 1}, ${FAILED_EVERY}) g`);
  return steps + Math.ceil(ops / FAILED_EVERY);
}

/**
 * Pruning one span of the step journal and failure breadcrumbs (`opstate_journal_prune`) beside
 * a writer, against deleting an identical span's rows: prints `retention_journal_prune_ms`,
 * `retention_journal_prune_wal_bytes` and `retention_journal_writer_stall_ms`.
 */
export async function measureJournalPrune(bench: JournalBench): Promise<void> {
  const { db, store, input, say } = bench;
  const template = await store.create(await input());
  await store.apply(template, { type: 'CANCEL', reason: 'bench' }, { by: 'operator' });
  const { a, b, c } = await reshapeSpans(db, Date.now());
  say(`filling two journal spans of ${bench.steps} steps each`);
  const rows = await fillSpan(bench, template, a);
  await fillSpan(bench, template, b);
  await db.execute('vacuum analyze operation_step, operation_failure_event, operation');
  const writer = await startWriter(store, input);
  const prune = await pruneBesideWriter(db, writer, () =>
    db.execute('select * from opstate_journal_prune()'),
  );
  const dropped = prune.result.filter((s) => s.dropped === true);
  if (dropped.length !== 1 || Number(dropped[0]?.rows_in) !== rows) {
    throw new Error(
      `the prune did not drop the span of ${rows} rows: ${JSON.stringify(prune.result)}`,
    );
  }
  const walAt = await walLsn(db);
  const range = `operation_id >= ${floorOf(b)} and operation_id < ${floorOf(c)}`;
  const deleteMs = await timed(async () => {
    await db.execute(`delete from operation_step where ${range}`);
    await db.execute(`delete from operation_failure_event where ${range}`);
  });
  const deleteWal = await walSince(db, walAt);
  const note = `${rows} steps and breadcrumbs of ${Math.ceil(bench.steps / STEPS_PER_OPERATION)} finished operations in the span`;
  print({
    name: 'retention_journal_prune_ms',
    value: prune.ms,
    unit: 'ms',
    baseline: deleteMs,
    note,
  });
  print({
    name: 'retention_journal_prune_wal_bytes',
    value: prune.wal,
    unit: 'B',
    baseline: deleteWal,
    note: "dropping the span (the window holds the writer's WAL too) against deleting its rows",
  });
  print({
    name: 'retention_journal_writer_stall_ms',
    value: prune.stall,
    unit: 'ms',
    baseline: prune.quietStall,
    note: 'the longest create + cancel during the prune, against the same writer after it',
  });
}
