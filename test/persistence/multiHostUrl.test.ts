import { createServer } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyFailure } from '../../machines/classifyFailure.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { PostgresPair } from '../helpers/privateServers.ts';

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

  it('with every host down, a statement fails as an outage once each was tried', async () => {
    const hosts = `127.0.0.1:${await closedPort()},127.0.0.1:${await closedPort()}`;
    const database = await openDatabase({ databaseUrl: `postgres://postgres@${hosts}/postgres` });
    try {
      // The last host's refusal (before, the statement waited for a host for ever, until opstate's
      // own bound on an unanswered statement gave it up).
      const refused = await database.execute('select 1').catch((e) => e);
      expect(refused).toMatchObject({
        code: OpstateErrorCode.DATABASE,
        retryable: true,
        message: expect.stringContaining('ECONNREFUSED'),
      });
      expect(classifyFailure(refused)).toBe('outage');
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

describe('a DATABASE_URL naming a standby before its primary', () => {
  let pair: PostgresPair;
  beforeAll(async () => {
    pair = await PostgresPair.start();
    await pair.primary.psql('create schema opstate; create table opstate.probe (n int)');
  }, 60_000);
  afterAll(async () => {
    await pair?.dispose();
  });

  it('with target_session_attrs=read-write, every connection of the pool is on the primary', async () => {
    const hosts = `127.0.0.1:${pair.standby.port},127.0.0.1:${pair.primary.port}`;
    const database = await openDatabase({
      databaseUrl: `postgres://postgres@${hosts}/postgres?target_session_attrs=read-write`,
      schema: 'opstate',
      max: 4,
    });
    try {
      // Eight statements at once open all four connections of the pool.
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          database.execute<{ standby: boolean }>(
            `insert into probe values (${i}) returning pg_is_in_recovery() as standby`,
          ),
        ),
      );
      expect(answers.flat().map((r) => r.standby)).toEqual(Array(8).fill(false));
      const [row] = await database.execute<{ n: number }>('select count(*)::int as n from probe');
      expect(row?.n).toBe(8);
    } finally {
      await database.close();
    }
  });

  it('with no host taking writes, a statement fails at once as an outage, naming the hosts', async () => {
    const hosts = `127.0.0.1:${await closedPort()},127.0.0.1:${pair.standby.port}`;
    const database = await openDatabase({
      databaseUrl: `postgres://postgres@${hosts}/postgres?target_session_attrs=read-write`,
      schema: 'opstate',
    });
    try {
      // Every host tried once, then the statement fails (before, it waited for a host for ever).
      const refused = await database.execute('select 1').catch((e) => e);
      expect(refused).toMatchObject({
        code: OpstateErrorCode.DATABASE,
        retryable: true,
        message: expect.stringContaining(`no host of ${hosts} gives a read-write session now`),
      });
      expect(classifyFailure(refused)).toBe('outage');
    } finally {
      await database.close();
    }
  });

  it('a write that reaches the standby alone waits as in an outage and says how to reach the primary', async () => {
    const database = await openDatabase({
      databaseUrl: `postgres://postgres@127.0.0.1:${pair.standby.port}/postgres`,
      schema: 'opstate',
    });
    try {
      const refused = await database.execute('insert into probe values (1)').catch((e) => e);
      expect(refused).toMatchObject({
        code: OpstateErrorCode.DATABASE,
        retryable: true,
        message: expect.stringContaining('target_session_attrs=read-write'),
      });
      expect(classifyFailure(refused)).toBe('outage');
    } finally {
      await database.close();
    }
  });
});
