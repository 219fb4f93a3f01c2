import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Clock, systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import {
  HistoryRetentionRepository,
  MAX_JOURNAL_DAYS,
} from '../../persistence/HistoryRetention.ts';
import { JournalRepository } from '../../persistence/JournalRepository.ts';
import { JournalRetentionRepository } from '../../persistence/JournalRetention.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createRuntime } from '../../runtime/Runtime.ts';
import { besideAClaim } from '../helpers/lockWaits.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { completedOperation, inputFor, MIGRATIONS, makeWorld } from './fixtures.ts';

const DAY = 86_400_000;
const KEEP = 400 * DAY;

/**
 * The retention of the step journal and the failure breadcrumbs, on a database of its own (a
 * span holds every operation created in its days, so no other suite may write live operations
 * into it): spans made ahead, the oldest dropped whole once every operation in it is finished and
 * old, never while one is live; the operations, lineage and re-plans stay; and a FAILED operation
 * whose journal went is retried only with a new plan. The tests run in order: the last drops the
 * first span.
 */
function journalRetentionSuite(db: () => Database): void {
  const policy = () => new HistoryRetentionRepository(db());
  const spans = () => new JournalRetentionRepository(db());
  /** Past the policy for everything made today: the first span (up to tomorrow) may go. */
  const later = () => new Date(Date.now() + KEEP + DAY);

  it('keeps spans made ahead: the first holds everything before partitioning, then spans of journal_days', async () => {
    const made = await spans().spans();
    const bounded = made.filter((s) => !s.isDefault);
    expect(bounded[0]).toMatchObject({ suffix: 'j0', lowerId: null });
    expect(bounded.length).toBeGreaterThanOrEqual(3);
    expect(made.at(-1)).toMatchObject({ suffix: 'default', isDefault: true });
    for (let i = 1; i < bounded.length; i++) {
      expect(bounded[i]?.lowerId).toBe(bounded[i - 1]?.upperId);
      expect(bounded[i]?.suffix).toMatch(/^j\d{8}$/);
    }
    expect(await spans().extend()).toBe(0);
  });

  it('refuses a span width that is not 1 to 3,660 whole days, and changes nothing', async () => {
    const before = await policy().policy();
    for (const journalDays of [0, MAX_JOURNAL_DAYS + 1, 1.5, Number.NaN]) {
      const err = await policy()
        .set({ keepMs: KEEP, journalDays })
        .catch((e: unknown) => e);
      expect(err, String(journalDays)).toBeInstanceOf(OpstateError);
      expect((err as OpstateError).code).toBe(OpstateErrorCode.BAD_INPUT);
    }
    expect(await policy().policy()).toEqual(before);
    const set = await policy().set({ keepMs: null, journalDays: 7, by: 'suite' });
    expect(set).toMatchObject({ keepMs: null, journalDays: 7, journalPrunedBelow: null });
  });

  it('prunes nothing without a policy, and nothing younger than it', async () => {
    await policy().set({ keepMs: null, by: 'suite' });
    expect(await spans().prune(later())).toEqual({ dropped: [], kept: [] });
    await policy().set({ keepMs: KEEP, by: 'suite' });
    const young = await spans().prune();
    expect(young.dropped).toEqual([]);
    expect(young.kept[0]).toMatchObject({ suffix: 'j0' });
    expect(young.kept[0]?.reason).toMatch(/created in the last 400 days/);
  });

  it('puts steps of an operation past every span into the default partitions, and makes the next span above them', async () => {
    const far = new OperationStore(db(), { clock: new SimulatedClock(Date.UTC(2300, 0, 1)) });
    const id = await far.create(inputFor(OperationKind.TRANSFER, await makeWorld(db())));
    const journal = new JournalRepository(db());
    await journal.recordFailure({
      kind: OperationKind.TRANSFER,
      operationId: id,
      attempt: 1,
      error: { message: 'a clock far ahead' },
    });
    expect(await spans().spilled()).toBe(1);
    const [row] = await db().execute<{ partition: string }>(
      `select tableoid::regclass::text as partition from operation_failure_event where operation_id = '${id}'`,
    );
    expect(row?.partition).toContain('operation_failure_event_default');
    // The next span would start after it, far past the horizon: nothing to make.
    expect(await spans().extend()).toBe(0);
    await far.apply(id, { type: 'CANCEL', reason: 'test' }, { by: 'operator' });
  });

  it('refuses an update of either table and a breadcrumb of the wrong kind, naming the table, not the partition', async () => {
    const store = new OperationStore(db());
    const journal = new JournalRepository(db());
    const id = await store.create(inputFor(OperationKind.TRANSFER, await makeWorld(db())));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-1' });
    await journal.recordStep({ operationId: id, attempt: 1, name: 'plan', state: 'done' });
    await journal.recordFailure({
      kind: OperationKind.TRANSFER,
      operationId: id,
      attempt: 1,
      error: {},
    });
    for (const table of ['operation_step', 'operation_failure_event']) {
      const err = await db()
        .execute(`update ${table} set at = now() where operation_id = '${id}'`)
        .catch((e: unknown) => e);
      expect(String((err as Error).message)).toMatch(new RegExp(`^${table} is append-only`));
    }
    const wrong = await journal
      .recordFailure({ kind: OperationKind.UNPACK, operationId: id, attempt: 2, error: {} })
      .catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(OpstateError);
    expect((wrong as OpstateError).code).toBe(OpstateErrorCode.BAD_INPUT);
    const cause = (wrong as OpstateError).cause as Error;
    expect(cause.message).toMatch(/table "operation_failure_event" violates the operation's kind/);
    expect(await journal.listFailures(id)).toHaveLength(1);
    await store.apply(id, { type: 'CANCEL', reason: 'test' }, { by: 'operator' });
  });

  it('keeps a span while a step or breadcrumb in it is recent, found through the block-range summaries whether written before or after them', async () => {
    await policy().set({ keepMs: KEEP, by: 'suite' });
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const id = await store.create(inputFor(OperationKind.TRANSFER, w));
    await store.apply(id, { type: 'CANCEL', reason: 'suite' }, { by: 'operator' });
    const now = later();
    const cutoff = new Date(now.getTime() - KEEP).toISOString();
    const recent = async () => {
      const [r] = await db().execute<{ recent: boolean }>(
        `select opstate_journal_recent('j0', '${cutoff}') as recent`,
      );
      return r?.recent;
    };
    await db().execute(`select opstate_journal_summarize('j0')`);
    expect(await recent()).toBe(false);
    // A breadcrumb of a transition whose writer's clock is ahead, recorded after the summaries.
    await db().execute(
      `insert into operation_failure_event (kind, operation_id, attempt, error, at)
       values ('transfer', '${id}', 1, '{"message":"clock ahead"}', '${cutoff}'::timestamptz + interval '1 hour')`,
    );
    expect(await recent()).toBe(true);
    await db().execute(`select opstate_journal_summarize('j0')`);
    expect(await recent()).toBe(true);
    const held = await spans().prune(now);
    expect(held.dropped).toEqual([]);
    expect(held.kept[0]).toMatchObject({ suffix: 'j0', rows: null });
    expect(held.kept[0]?.reason).toMatch(/recorded in the last 400 days/);
    await db().execute(`delete from operation_failure_event where operation_id = '${id}'`);
    expect(await recent()).toBe(false);
  });

  it('drops the oldest span once all of its operations are finished; the operations, their lineage and re-plans stay; a FAILED one is retried only with a new plan', async () => {
    await policy().set({ keepMs: KEEP, by: 'suite' });
    const store = new OperationStore(db());
    const journal = new JournalRepository(db());
    const w = await makeWorld(db());
    const step = (operationId: string, name: string) =>
      journal.recordStep({ operationId, attempt: 1, name, state: 'done', result: { name } });

    const failed = await store.create(inputFor(OperationKind.TRANSFER, w));
    await store.apply(failed, { type: 'SCHEDULE' });
    await store.apply(failed, { type: 'START', attempt: 1, workerId: 'w-1' });
    await step(failed, 'upload');
    const error = { message: 'destination refused', retryable: false };
    await store.apply(failed, { type: 'FAIL', attempt: 1, error });
    expect((await store.load(failed)).status).toBe('FAILED');
    expect(await journal.listFailures(failed)).toHaveLength(1);

    const live = await store.create(inputFor(OperationKind.UNPACK, w));
    const output = {
      artifactType: 'data_transfer_package',
      artifactId: w.dtp,
      locationId: w.buffer.id,
    } as const;
    const done = await completedOperation(store, inputFor(OperationKind.TRANSFER, w), [output]);

    // A live operation in the span holds all of it.
    const held = await spans().prune(later());
    expect(held.dropped).toEqual([]);
    expect(held.kept[0]).toMatchObject({ suffix: 'j0' });
    expect(held.kept[0]?.reason).toMatch(/live operation/);
    expect(await journal.listSteps(failed)).toHaveLength(1);

    await store.apply(live, { type: 'CANCEL', reason: 'not needed' }, { by: 'operator' });
    const [inFirst] = await db().execute<{ n: number }>(
      `select (select count(*) from operation_step_j0) + (select count(*) from operation_failure_event_j0) as n`,
    );
    const pruned = await spans().prune(later());
    expect(pruned.dropped.map((s) => s.suffix)).toEqual(['j0']);
    // The failed one's step and breadcrumb among them (the others here recorded none).
    expect(Number(inFirst?.n)).toBeGreaterThanOrEqual(2);
    expect(pruned.dropped[0]?.rows).toBe(Number(inFirst?.n));
    expect(pruned.kept[0]?.reason).toMatch(/created in the last/);
    const { journalPrunedBelow } = await policy().policy();
    expect(journalPrunedBelow).toBe(pruned.dropped[0]?.upperId);

    expect(await journal.listSteps(failed)).toEqual([]);
    expect(await journal.listFailures(failed)).toEqual([]);
    expect((await store.load(done)).status).toBe('COMPLETED');
    const lineage = await db().execute(
      `select 1 from operation_output where operation_id = '${done}'`,
    );
    expect(lineage).toHaveLength(1);
    expect(await journal.listTransitions(failed)).toHaveLength(4);

    // A plain retry would take the dropped steps again: refused, nothing changes.
    const before = await store.load(failed);
    const refused = await store
      .apply(failed, { type: 'RETRY' }, { by: 'operator' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpstateError);
    expect((refused as OpstateError).code).toBe(OpstateErrorCode.CONFLICT);
    expect((refused as OpstateError).message).toMatch(/step journal.*--replan/);
    const after = await store.load(failed);
    expect({ status: after.status, attempt: after.attempt, version: after.version }).toEqual({
      status: before.status,
      attempt: before.attempt,
      version: before.version,
    });

    // With a new plan it goes again, and its new steps are kept where its span was.
    expect(await journal.replan(failed, { by: 'operator', reason: 'journal pruned' })).toEqual({
      generation: 2,
    });
    await store.apply(failed, { type: 'RETRY' }, { by: 'operator' });
    expect((await store.load(failed)).status).toBe('PENDING');
  });
}

describe('journal retention on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_journal', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url, max: 4 });
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  journalRetentionSuite(() => database);
});

describe('journal retention beside a claim, on Postgres', () => {
  it('a prune beside a transaction that has locked operation rows and then writes them drops the span without a deadlock', async () => {
    const own = await createTestDatabase('opstate_journal_claim', { migrated: true });
    const database = await openDatabase({ databaseUrl: own.url, max: 2 });
    try {
      await new HistoryRetentionRepository(database).set({ keepMs: KEEP, by: 'test' });
      const store = new OperationStore(database);
      const id = await store.create(inputFor(OperationKind.TRANSFER, await makeWorld(database)));
      await store.apply(id, { type: 'CANCEL', reason: 'not needed' }, { by: 'operator' });
      const { dropped } = await besideAClaim(own.url, id, 'opstate_journal_prune', () =>
        new JournalRetentionRepository(database).prune(new Date(Date.now() + KEEP + DAY)),
      );
      expect(dropped.map((d) => d.suffix)).toContain('j0');
    } finally {
      await database.close();
      await dropTestDatabase(own);
    }
  });
});

describe('journal retention on embedded PGlite', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://' });
    expect(await migrate(database)).toEqual({ applied: MIGRATIONS, total: MIGRATIONS });
  });

  afterAll(async () => {
    await database?.close();
  });

  journalRetentionSuite(() => database);
});

describe("the leader's care of the journal", () => {
  it('warns when steps or failures overflow into the default partitions, once per change of their number', async () => {
    // A database of its own: its leader would schedule the other suites' operations.
    const own = await createTestDatabase('opstate_journal_leader', { migrated: true });
    const database = await openDatabase({ databaseUrl: own.url, max: 2 });
    const logger = memoryLogger();
    // The history loop's passes, counted by its waits (an interval no other loop uses).
    const HISTORY_MS = 137;
    let passes = 0;
    const counting: Clock = {
      now: () => systemClock.now(),
      sleep: (ms, signal) => {
        if (ms === HISTORY_MS) passes++;
        return systemClock.sleep(ms, signal);
      },
      setTimeout: (fn, ms) => systemClock.setTimeout(fn, ms),
      clearTimeout: (handle) => systemClock.clearTimeout(handle),
    };
    const runtime = await createRuntime({
      databaseUrl: own.url,
      logger,
      clock: counting,
      timing: { historyIntervalMs: HISTORY_MS },
    });
    const warnings = () =>
      logger.lines
        .filter(
          (l) =>
            l.message === 'steps or failures overflowed into the default partitions of the journal',
        )
        .map((l) => l.fields?.rows);
    const passesFrom = async (n: number) => {
      const from = passes;
      await waitFor(async () => passes >= from + n, `${n} passes of the history loop`);
    };
    try {
      const w = await makeWorld(database);
      // Operations whose ids a clock far ahead made: past every span the leader keeps.
      const far = new OperationStore(database, { clock: new SimulatedClock(Date.UTC(2300, 0, 1)) });
      const journal = new JournalRepository(database);
      // Made and cancelled before the leader starts: its scheduler would take them.
      const ids: string[] = [];
      for (let n = 0; n < 2; n++) {
        const id = await far.create(inputFor(OperationKind.TRANSFER, w));
        await far.apply(id, { type: 'CANCEL', reason: 'test' }, { by: 'operator' });
        ids.push(id);
      }
      const failure = (operationId: string | undefined) =>
        journal.recordFailure({
          kind: OperationKind.TRANSFER,
          operationId: String(operationId),
          attempt: 1,
          error: { message: 'a clock far ahead' },
        });
      runtime.startControlPlane();
      await passesFrom(2);
      expect(warnings()).toEqual([]);
      await failure(ids[0]);
      await waitFor(async () => warnings().length === 1, 'the warning for one row');
      await passesFrom(3);
      await failure(ids[1]);
      await waitFor(async () => warnings().length === 2, 'the warning for two rows');
      await passesFrom(3);
      expect(warnings()).toEqual([1, 2]);
      expect(await new JournalRetentionRepository(database).spilled()).toBe(2);
    } finally {
      await runtime.close();
      await database.close();
      await dropTestDatabase(own);
    }
  });
});
