import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRetentionCommand } from '../../cli/commands/retention.ts';
import { type Clock, systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { HistoryRetentionRepository } from '../../persistence/HistoryRetention.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createRuntime } from '../../runtime/Runtime.ts';
import { besideAClaim } from '../helpers/lockWaits.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, MIGRATIONS, makeWorld } from './fixtures.ts';
import { retentionSuite } from './retentionSuite.ts';

const DAY = 86_400_000;

describe('history retention on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_retention', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url, max: 4 });
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  retentionSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  it('`opstate retention set|show|prune` sets the policy, shows the partitions and prunes as the leader would', async () => {
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    const cli = createRetentionCommand(() => openDatabase({ databaseUrl: testDb.url, max: 1 }));
    expect(await cli.run(['set', '--keep', '400d', '--by', 'ops'], io)).toBe(0);
    expect(out.pop()).toMatch(
      /^history kept 400d; partitions of [\d,]+ ids, journal spans of 30 days \(set by ops, /,
    );
    expect(await cli.run(['set', '--keep', '400d', '--journal-days', '7', '--by', 'ops'], io)).toBe(
      0,
    );
    expect(out.pop()).toMatch(/journal spans of 7 days \(set by ops, /);
    // Refused by the repository, and nothing changes: a span of more than ten years.
    expect(await cli.run(['set', '--keep', '400d', '--journal-days', '3661'], io)).not.toBe(0);
    expect((await new HistoryRetentionRepository(database).policy()).journalDays).toBe(7);
    expect(await cli.run(['show', '--json'], io)).toBe(0);
    const shown = JSON.parse(out.pop() as string);
    expect(shown.policy).toMatchObject({ keepMs: 400 * DAY, setBy: 'ops' });
    expect(shown.partitions.at(-1)).toMatchObject({
      name: 'operation_transition_default',
      isDefault: true,
    });
    expect(shown.journal[0]).toMatchObject({ suffix: 'j0', lowerId: null });
    expect(shown.journal.at(-1)).toMatchObject({ suffix: 'default', isDefault: true });
    expect(await cli.run(['show'], io)).toBe(0);
    expect(out.some((l) => /^journal span j0 +operations −∞ up to /.test(l))).toBe(true);
    expect(await cli.run(['prune', '--json'], io)).toBe(0);
    const pruned = JSON.parse(out.pop() as string);
    expect(pruned).toHaveProperty('dropped');
    expect(pruned.journal).toHaveProperty('dropped');
    // Refused by the parser, before the database: less than a day, and not a duration.
    for (const keep of ['12h', 'soon']) {
      expect(await cli.run(['set', '--keep', keep], io)).not.toBe(0);
    }
    expect(await cli.run(['set', '--keep', 'forever'], io)).toBe(0);
    expect(out.pop()).toMatch(/^history kept for ever;/);
    expect((await new HistoryRetentionRepository(database).policy()).keepMs).toBeNull();
  });

  it("the leader makes partitions ahead as the ids run on, and drops what the policy lets go by its clock's time", async () => {
    // A database of its own: the suite's PENDING operations would be scheduled by this leader.
    const own = await createTestDatabase('opstate_retention_leader', { migrated: true });
    const database = await openDatabase({ databaseUrl: own.url, max: 2 });
    const retention = new HistoryRetentionRepository(database);
    await retention.set({ keepMs: 400 * DAY, partitionIds: 1_000, by: 'test' });
    const made = () => retention.partitions();
    const top = Math.max(
      ...(await made()).filter((p) => !p.isDefault).map((p) => p.upperId as number),
    );
    // The ids run up to the last partition made: the leader must make more.
    await database.execute(`select setval('operation_transition_id_seq', ${top - 10}, false)`);
    const w = await makeWorld(database);
    const logger = memoryLogger();
    // The control plane's clock stands 401 days on: everything written now is past the policy.
    const later: Clock = {
      now: () => systemClock.now() + 401 * DAY,
      sleep: (ms, signal) => systemClock.sleep(ms, signal),
      setTimeout: (fn, ms) => systemClock.setTimeout(fn, ms),
      clearTimeout: (handle) => systemClock.clearTimeout(handle),
    };
    const runtime = await createRuntime({
      databaseUrl: own.url,
      logger,
      clock: later,
      timing: { historyIntervalMs: 100 },
    });
    try {
      // Written at today's time (the runtime would stamp its clock's).
      const store = new OperationStore(database);
      const id = await store.create(inputFor(OperationKind.TRANSFER, w));
      await store.apply(id, { type: 'CANCEL', reason: 'not needed' }, { by: 'operator' });
      runtime.startControlPlane();
      await waitFor(
        async () =>
          Math.max(...(await made()).filter((p) => !p.isDefault).map((p) => p.upperId as number)) >=
          top + 1_000,
        'the leader to make partitions past the ids',
      );
      // The partition that held the operation's transitions, once whole, is dropped.
      await database.execute(`select setval('operation_transition_id_seq', ${top}, false)`);
      let seen: unknown;
      await waitFor(
        async () => {
          seen = {
            relay: await database.execute('select * from dispatch_relay_cursor'),
            parts: await retention.partitions(),
            seq: await database.execute('select * from operation_transition_id_seq'),
            lines: logger.lines.filter((l) => l.level !== 'DEBUG').slice(-3),
          };
          return logger.lines.some(
            (l) =>
              l.message === 'history partition dropped by the retention policy' &&
              l.fields?.toId === top,
          );
        },
        'the leader to drop the partition the policy lets go',
        20_000,
        100,
        () => JSON.stringify(seen),
      );
      const [history] = await database.execute<{ n: number }>(
        `select count(*)::int as n from operation_transition where operation_id = '${id}'`,
      );
      expect(history?.n).toBe(0);
      expect((await runtime.store.load(id)).status).toBe('FAILED');
    } finally {
      await runtime.close();
      await database.close();
      await dropTestDatabase(own);
    }
  });
});

describe('history retention against a writer holding its locks, on Postgres', () => {
  it('a prune that cannot take its locks within 2 s fails with CONFLICT, drops nothing, and the next pass drops the partition', async () => {
    const own = await createTestDatabase('opstate_retention_lock', { migrated: true });
    const database = await openDatabase({ databaseUrl: own.url, max: 2 });
    const writer = await openDatabase({ databaseUrl: own.url, max: 1 });
    try {
      const retention = new HistoryRetentionRepository(database);
      await retention.set({ keepMs: 400 * DAY, by: 'test' });
      // The migration's first partition ([MINVALUE, 1)) is whole and empty: droppable at once,
      // once the locks are had.
      const first = (await retention.partitions())[0]?.name;
      expect(first).toBe('operation_transition_p0');
      // A writer's open transaction on operation, as a status change holds it.
      let release = () => {};
      const held = new Promise<void>((r) => {
        release = r;
      });
      let locked = () => {};
      const taken = new Promise<void>((r) => {
        locked = r;
      });
      const open = writer.transaction(async (tx) => {
        await tx.execute('lock table operation in row exclusive mode');
        locked();
        await held;
      });
      await taken;
      const refused = await retention.prune(new Date(Date.now() + 401 * DAY)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(OpstateError);
      expect((refused as OpstateError).code).toBe(OpstateErrorCode.CONFLICT);
      expect((refused as OpstateError).retryable).toBe(true);
      expect((await retention.partitions()).map((p) => p.name)).toContain(first);
      release();
      await open;
      const { dropped } = await retention.prune(new Date(Date.now() + 401 * DAY));
      expect(dropped.map((d) => d.name)).toContain(first);
    } finally {
      await writer.close();
      await database.close();
      await dropTestDatabase(own);
    }
  });
});

describe('history retention beside a claim, on Postgres', () => {
  it('a prune beside a claim that has locked its rows and then writes them drops the partition without a deadlock', async () => {
    const own = await createTestDatabase('opstate_retention_claim', { migrated: true });
    const database = await openDatabase({ databaseUrl: own.url, max: 2 });
    try {
      const retention = new HistoryRetentionRepository(database);
      await retention.set({ keepMs: 400 * DAY, by: 'test' });
      const first = (await retention.partitions())[0]?.name;
      expect(first).toBe('operation_transition_p0');
      const id = await new OperationStore(database).create(
        inputFor(OperationKind.TRANSFER, await makeWorld(database)),
      );
      const { dropped } = await besideAClaim(own.url, id, 'opstate_history_prune', () =>
        retention.prune(new Date(Date.now() + 401 * DAY)),
      );
      expect(dropped.map((d) => d.name)).toContain(first);
    } finally {
      await database.close();
      await dropTestDatabase(own);
    }
  });
});

describe('history retention on embedded PGlite', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://' });
    expect(await migrate(database)).toEqual({ applied: MIGRATIONS, total: MIGRATIONS });
  });

  afterAll(async () => {
    await database?.close();
  });

  retentionSuite({ database: () => database, peer: async () => database });
});
