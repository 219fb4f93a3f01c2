import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createWebSocketReceiver, type StatelyInspectionEvent } from '@statelyai/inspect';
import { createInspectorServer } from '@statelyai/inspect/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { JournalRepository } from '../../persistence/JournalRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { freePort, reachable } from '../transport/helpers.ts';

const BIN = fileURLToPath(new URL('../../bin/opstate.js', import.meta.url));

describe('opstate control-plane --inspect, as shipped', () => {
  let testDb: TestDatabase;
  let database: Database;
  let child: ChildProcess | undefined;
  let relay: { stop(): void } | undefined;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_cpinspect', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    relay?.stop();
    await database?.close();
    await dropTestDatabase(testDb);
  });

  it('streams every operation the control plane moves, and what others write, to a relay; stops cleanly', async () => {
    const port = await freePort();
    relay = createInspectorServer({ port, autoOpen: false });
    await waitFor(() => reachable(port), 'the relay to listen');
    const received: StatelyInspectionEvent[] = [];
    createWebSocketReceiver({ server: `ws://127.0.0.1:${port}` }).subscribe((e) =>
      received.push(e),
    );
    const { NATS_URL: _nats, ...env } = process.env;
    const proc = spawn(
      process.execPath,
      [
        BIN,
        'control-plane',
        '--in-process',
        '--inspect',
        '--inspect-url',
        `ws://127.0.0.1:${port}`,
      ],
      {
        env: {
          ...env,
          DATABASE_URL: testDb.url,
          OPSTATE_PREFIX: `cpinspect_${port}`,
          OPSTATE_TIMING: JSON.stringify({ leaderPollMs: 100, schedulerIntervalMs: 50 }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child = proc;
    let out = '';
    proc.stdout?.on('data', (d) => {
      out += String(d);
    });
    proc.stderr?.on('data', (d) => {
      out += String(d);
    });
    await waitFor(
      () => out.includes('elected leader'),
      'leadership',
      30_000,
      50,
      () => out,
    );

    const store = new OperationStore(database);
    const id = await store.create(inputFor(OperationKind.TRANSFER, await makeWorld(database)));
    const journal = new JournalRepository(database);
    // The control plane schedules it (no worker here), then an operator resets it.
    await waitFor(async () => (await store.load(id)).status === 'SCHEDULED', 'the scheduler');
    await store.apply(id, { type: 'RESET', by: 'operator', reason: 'drill' }, { by: 'operator' });
    await waitFor(
      async () => (await journal.listTransitions(id)).length >= 4,
      'the reset operation to be scheduled again',
    );
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    // Stopping drained the stream: every stored transition reached the relay, in order.
    const stored = await journal.listTransitions(id);
    const mine = () => received.filter((e) => e.sessionId === id);
    await waitFor(
      () => mine().length === 1 + 2 * stored.length,
      'every event',
      10_000,
      20,
      () => JSON.stringify(mine().map((e) => e.type)),
    );
    const events = mine().filter((e) => e.type === '@xstate.event');
    expect(
      events.map((e) => (e.type === '@xstate.event' ? [e.event.type, e.sourceId] : [])),
    ).toEqual(stored.map((t) => [t.event === 'CREATE' ? 'xstate.init' : t.event, t.by]));
  });
});
