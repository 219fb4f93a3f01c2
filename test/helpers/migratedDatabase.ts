import { afterAll, beforeAll } from 'vitest';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from './postgres.ts';

/**
 * A migrated database of its own on the real Postgres for the file or `describe` block that calls
 * it: created and migrated in `beforeAll`, closed and dropped in `afterAll`. Returns a getter,
 * valid from the first test on.
 *
 * @example
 * ```ts
 * const db = migratedDatabase();
 * it('…', async () => { const store = new OperationStore(db()); });
 * ```
 */
export function migratedDatabase(
  options: { readonly prefix?: string; readonly max?: number } = {},
): () => Database {
  let testDb: TestDatabase | undefined;
  let database: Database | undefined;
  beforeAll(async () => {
    testDb = await createTestDatabase(options.prefix, { migrated: true });
    database = await openDatabase({
      databaseUrl: testDb.url,
      ...(options.max === undefined ? {} : { max: options.max }),
    });
    await migrate(database);
  });
  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });
  return () => {
    if (database === undefined)
      throw new Error('the test database is not open yet (use it in a test)');
    return database;
  };
}
