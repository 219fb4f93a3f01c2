import { afterAll, beforeAll, describe } from 'vitest';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { breakerSuite } from './breakerSuite.ts';

describe('circuit breakers on embedded PGlite', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://' });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
  });

  // PGlite has one connection: the "peer" is the same database, and concurrent calls queue.
  breakerSuite({
    database: () => database,
    peer: async () => database,
    waitUntilBlocked: async () => {},
  });
});
