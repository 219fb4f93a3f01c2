import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';

const BIN = fileURLToPath(new URL('../../bin/opstate.js', import.meta.url));

describe('opstate dashboard, as shipped', () => {
  let testDb: TestDatabase;
  let database: Database;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_dashcmd', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    await database?.close();
    await dropTestDatabase(testDb);
  });

  it('serves the overview on the port it prints, read-only by default, and stops on SIGTERM', async () => {
    const w = await makeWorld(database);
    const id = await new OperationStore(database).create(inputFor(OperationKind.STAGING, w));
    const { NATS_URL: _nats, ...env } = process.env;
    const proc = spawn(process.execPath, [BIN, 'dashboard', '--port', '0'], {
      env: { ...env, DATABASE_URL: testDb.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    let out = '';
    proc.stdout?.on('data', (d) => {
      out += String(d);
    });
    proc.stderr?.on('data', (d) => {
      out += String(d);
    });
    await waitFor(
      () => /dashboard at http:\/\/127\.0\.0\.1:\d+/.test(out),
      'the address',
      30_000,
      50,
      () => out,
    );
    expect(out).toMatch(/read-only; heartbeats not visible: in-process transport/);
    const url = /dashboard at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] as string;
    const page = await fetch(`${url}/operations/${id}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(id);
    const action = await fetch(`${url}/api/operations/${id}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-opstate-action': '1' },
      body: '{}',
    });
    expect(action.status).toBe(403);
    expect((await new OperationStore(database).load(id)).status).toBe('PENDING');
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
