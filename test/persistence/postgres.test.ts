import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { contractSuite } from './contractSuite.ts';
import { copySuite } from './copySuite.ts';
import { MIGRATIONS } from './fixtures.ts';
import { storeSuite } from './storeSuite.ts';

// The suite needs the real Postgres: createTestDatabase throws when it is unreachable, so the
// run fails instead of skipping.
describe('persistence on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  storeSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  copySuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  contractSuite({
    database: () => database,
    peer: () => openDatabase({ databaseUrl: testDb.url, max: 4 }),
  });

  it('migrations racing from two connections apply each migration exactly once', async () => {
    const fresh = await createTestDatabase();
    const a = await openDatabase({ databaseUrl: fresh.url, max: 2 });
    const b = await openDatabase({ databaseUrl: fresh.url, max: 2 });
    try {
      const results = await Promise.all([migrate(a), migrate(b), migrate(a), migrate(b)]);
      expect(results.map((r) => r.applied).sort()).toEqual([0, 0, 0, MIGRATIONS]);
      const [row] = await a.execute('select count(*)::int as n from drizzle.__drizzle_migrations');
      expect(row?.n).toBe(MIGRATIONS);
    } finally {
      await a.close();
      await b.close();
      await dropTestDatabase(fresh);
    }
  });

  it('`opstate migrate` racing from two processes applies each migration exactly once', async () => {
    const fresh = await createTestDatabase();
    const run = () =>
      promisify(execFile)(process.execPath, opstateArgs(['migrate']), {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: fresh.url },
      });
    try {
      const outs = (await Promise.all([run(), run()])).map((r) => r.stdout.trim()).sort();
      expect(outs).toEqual([
        `applied ${MIGRATIONS} of ${MIGRATIONS} migrations (postgres)`,
        `schema is current (${MIGRATIONS} migrations, postgres)`,
      ]);
    } finally {
      await dropTestDatabase(fresh);
    }
  });

  it('a reserved connection keeps a session advisory lock until released', async () => {
    const one = await database.reserve();
    const two = await database.reserve();
    try {
      const [got] = await one.execute<{ ok: boolean }>('select pg_try_advisory_lock(4242) as ok');
      const [blocked] = await two.execute<{ ok: boolean }>(
        'select pg_try_advisory_lock(4242) as ok',
      );
      expect([got?.ok, blocked?.ok]).toEqual([true, false]);
      const [unlocked] = await one.execute<{ ok: boolean }>(
        'select pg_advisory_unlock(4242) as ok',
      );
      expect(unlocked?.ok).toBe(true);
    } finally {
      await one.release();
      await two.release();
    }
  });
});
