import { afterAll, beforeAll, describe, expect } from 'vitest';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { storeSuite } from './storeSuite.ts';

describe('persistence on embedded PGlite (in memory)', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://' });
    expect(database.dialect).toBe('pglite');
    expect(await migrate(database)).toEqual({ applied: 2, total: 2 });
  });

  afterAll(async () => {
    await database?.close();
  });

  // PGlite has one connection: the "peer" is the same database, and concurrent calls queue.
  storeSuite({ database: () => database, peer: async () => database });
});
