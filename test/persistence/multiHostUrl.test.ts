import { createServer } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';

/** A loopback port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `postgres://u:p@127.0.0.1:<down>,127.0.0.1:5432/db?…`: the hosts of a primary and a standby. */
function withHosts(url: string, hosts: string, query: string): string {
  const u = new URL(url);
  const auth = u.username === '' ? '' : `${u.username}${u.password ? `:${u.password}` : ''}@`;
  return `${u.protocol}//${auth}${hosts}${u.pathname}?${query}`;
}

describe('a DATABASE_URL with several hosts', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await dropTestDatabase(db);
  });

  it('opens on the host that takes writes when the first one is down', async () => {
    const live = new URL(db.url).host;
    const url = withHosts(
      db.url,
      `127.0.0.1:${await closedPort()},${live}`,
      'target_session_attrs=read-write',
    );
    const database = await openDatabase({ databaseUrl: url, schema: 'opstate' });
    try {
      await database.execute(sql`create schema opstate`);
      await database.execute(sql`create table opstate.probe (n int)`);
      await database.execute(sql`insert into opstate.probe values (7)`);
      const rows = await database.execute<{ n: number }>(sql`select n from opstate.probe`);
      expect(rows).toEqual([{ n: 7 }]);
    } finally {
      await database.close();
    }
  });

  it('is refused with a clear error when it sets search_path, as a one-host URL is', async () => {
    const url = withHosts(db.url, `h1:5432,${new URL(db.url).host}`, 'search_path=elsewhere');
    await expect(openDatabase({ databaseUrl: url })).rejects.toMatchObject({
      code: OpstateErrorCode.CONFIG,
      message: expect.stringContaining('remove it from the URL'),
    });
  });
});
