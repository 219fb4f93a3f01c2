import { afterAll, beforeAll, describe } from 'vitest';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../transport/helpers.ts';
import { breakerSuite } from './breakerSuite.ts';

describe('circuit breakers on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_breaker');
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
});
