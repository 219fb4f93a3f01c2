import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * The postgres.js opstate ships (persistence/vendor/postgres) survives a write after its socket
 * closed: upstream 3.4.9 throws an uncatchable TypeError from `nextWrite` that kills the process
 * (porsager/postgres#1066, #1154, #1208). A reserved connection whose backend is terminated
 * reaches that write deterministically: every query sent on it after the close.
 */
let testDb: TestDatabase;
let database: Database;
let admin: Database;

beforeAll(async () => {
  testDb = await createTestDatabase('opstate_vendored_pg');
  // One connection: the one reserved, then handed back, is the one the next query runs on.
  database = await openDatabase({ databaseUrl: testDb.url, max: 1 });
  admin = await openDatabase({ databaseUrl: testDb.url, max: 1 });
});
afterAll(async () => {
  await database?.close();
  await admin?.close();
  await dropTestDatabase(testDb);
});

const causeCode = (err: unknown) => (err as { cause?: { code?: unknown } }).cause?.code;

describe('the vendored postgres.js', () => {
  it('rejects a query written after the socket closed with CONNECTION_CLOSED, and the pool recovers after release', async () => {
    const reserved = await database.reserve();
    const [me] = await reserved.execute<{ pid: number }>('select pg_backend_pid() as pid');
    await admin.execute(`select pg_terminate_backend(${me?.pid})`);
    // Until the driver has seen the close a query may still meet the server's shutdown notice;
    // once it has, every query is a write with no socket: rejected, and the process lives on.
    await waitFor(
      async () =>
        causeCode(await reserved.execute('select 1').catch((e: unknown) => e)) ===
        'CONNECTION_CLOSED',
      'a query on the dead reserved connection to be rejected as CONNECTION_CLOSED',
    );
    const again = await reserved.execute('select 1').catch((e: unknown) => e);
    expect(causeCode(again)).toBe('CONNECTION_CLOSED');
    expect((again as { retryable?: boolean }).retryable).toBe(true);
    await reserved.release();
    // The closed connection is not put back among the open ones: the next query reconnects.
    expect(await database.execute<{ one: number }>('select 1 as one')).toEqual([{ one: 1 }]);
  });
});
