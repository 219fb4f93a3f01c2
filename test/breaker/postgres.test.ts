import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCircuitBreaker } from '../../control-plane/CircuitBreaker.ts';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { waitFor } from '../transport/helpers.ts';
import { breakerSuite } from './breakerSuite.ts';

describe('circuit breakers on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_breaker', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  breakerSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
    waitUntilBlocked: () =>
      waitFor(async () => {
        const [row] = await database.execute(`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`);
        return Number(row?.n) > 0;
      }, 'the second claimer to wait on the probe lock'),
  });

  it('a failure that commits after a later one was read is still counted', async () => {
    const breaker = createCircuitBreaker({
      database,
      clock: systemClock,
      logger: memoryLogger(),
      policy: { threshold: 3, cooldownMs: 600_000 },
      batchSize: 1024,
    });
    await breaker.pass();
    const w = await makeWorld(database);
    const ids = await new OperationStore(database).createMany(
      Array.from({ length: 3 }, () => inputFor(OperationKind.LONG_TERM_ARCHIVE, w)),
    );
    const failRow = (id: string) => `insert into operation_transition
      (operation_id, from_status, to_status, event, attempt, by, reason, at)
      values ('${id}', 'IN_PROGRESS', 'FAILED', 'FAIL', 1, 'w-test', 'archive unreachable', now())`;
    const peer = await openDatabase({ databaseUrl: testDb.url, max: 2 });
    try {
      // The first failure takes its id first but commits last.
      let inserted!: () => void;
      let commit!: () => void;
      const afterInsert = new Promise<void>((r) => {
        inserted = r;
      });
      const gate = new Promise<void>((r) => {
        commit = r;
      });
      const late = peer.transaction(async (tx) => {
        await tx.execute(failRow(ids[0] as string));
        inserted();
        await gate;
      });
      await afterInsert;
      await database.execute(failRow(ids[1] as string));
      await database.execute(failRow(ids[2] as string));
      await breaker.pass();
      const repo = new CircuitBreakerRepository(database);
      const mine = async () =>
        (
          await repo.loadForPass([
            { kind: OperationKind.LONG_TERM_ARCHIVE, locationId: w.archive.id },
          ])
        ).find((b) => b.locationId === w.archive.id);
      const counted = await mine();
      expect(counted).toMatchObject({ state: 'CLOSED', consecutiveFailures: 2 });
      commit();
      await late;
      await breaker.pass();
      const opened = await mine();
      expect(opened).toMatchObject({ state: 'OPEN', consecutiveFailures: 3 });
    } finally {
      await peer.close();
    }
  });
});
