import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  createWebSocketInspector,
  createWebSocketReceiver,
  type StatelyInspectionEvent,
} from '@statelyai/inspect';
import { createInspectorServer } from '@statelyai/inspect/server';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { Io } from '../../cli/Command.ts';
import { UsageError } from '../../cli/Command.ts';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { openStatelyInspection, requestedInspection } from '../../cli/statelyInspection.ts';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { applyEvents } from '../../persistence/applyEvents.ts';
import { JournalRepository, type TransitionEntry } from '../../persistence/JournalRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { replayOperation, startInspectionStream } from '../../runtime/InspectionStream.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld, type World } from '../persistence/fixtures.ts';
import { verifiedArchiveOutput } from '../persistence/verifiedArchive.ts';
import { freePort } from '../transport/helpers.ts';

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ port, host: 'localhost' });
    s.once('connect', () => {
      s.end();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** A relay (the library's server) and the library's receiver listening to it. */
async function relayWithReceiver() {
  const port = await freePort();
  const server = createInspectorServer({ port, autoOpen: false });
  const url = `ws://localhost:${port}`;
  const received: StatelyInspectionEvent[] = [];
  // The receiver connects once the relay listens; the relay replays what it got before that.
  await waitFor(() => listening(port), 'the relay to listen');
  const receiver = createWebSocketReceiver({ server: url });
  const subscription = receiver.subscribe((e) => received.push(e));
  return {
    url,
    received,
    stop() {
      subscription.unsubscribe();
      server.stop();
    },
  };
}

const of = (events: StatelyInspectionEvent[], sessionId: string) =>
  events.filter((e) => e.sessionId === sessionId);

/**
 * What the inspector must have received for one operation: its registration with the lifecycle
 * machine's definition, then per stored transition one event (from who sent it) and one snapshot
 * (the stored status), in order.
 */
function expectStoredPath(
  events: StatelyInspectionEvent[],
  operationId: string,
  stored: readonly TransitionEntry[],
) {
  const mine = of(events, operationId);
  const [actor, ...rest] = mine;
  expect(actor?.type).toBe('@xstate.actor');
  if (actor?.type !== '@xstate.actor') return;
  expect(actor.name).toBe('operation');
  const definition = JSON.parse(actor.definition ?? '{}') as { id: string; states: object };
  expect(definition.id).toBe('operation');
  expect(Object.keys(definition.states).sort()).toEqual([...OPERATION_STATUSES].sort());
  expect(rest.map((e) => e.type)).toEqual(
    stored.flatMap(() => ['@xstate.event', '@xstate.snapshot']),
  );
  const sent = rest.filter((e) => e.type === '@xstate.event');
  const snapshots = rest.filter((e) => e.type === '@xstate.snapshot');
  expect(sent.map((e) => (e.type === '@xstate.event' ? e.event.type : ''))).toEqual(
    stored.map((t) => (t.event === 'CREATE' ? 'xstate.init' : t.event)),
  );
  expect(sent.map((e) => (e.type === '@xstate.event' ? e.sourceId : ''))).toEqual(
    stored.map((t) => t.by),
  );
  expect(snapshots.map((e) => (e.snapshot as unknown as { value: string }).value)).toEqual(
    stored.map((t) => t.to),
  );
  // Every sender is registered as an actor of its own, so the inspector can draw it.
  const senders = new Set(events.filter((e) => e.type === '@xstate.actor').map((e) => e.sessionId));
  for (const t of stored) expect(senders.has(t.by)).toBe(true);
}

describe('Stately inspection built from persisted transitions', () => {
  let testDb: TestDatabase;
  let database: Database;
  let store: OperationStore;
  let journal: JournalRepository;
  let world: World;
  const cleanups: (() => unknown)[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_inspect', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
    store = new OperationStore(database);
    journal = new JournalRepository(database);
    world = await makeWorld(database);
  });

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  /** Walks a new operation through a reset by the monitor, a retry, a failure and an operator retry. */
  async function walkedOperation(): Promise<string> {
    const id = await store.create({
      ...inputFor(OperationKind.LONG_TERM_ARCHIVE, world),
      by: 'ingest',
    });
    const start = async (attempt: number, workerId: string) => {
      await store.apply(id, { type: 'SCHEDULE' });
      await store.apply(id, { type: 'START', attempt, workerId });
    };
    await start(1, 'worker-1');
    await store.apply(id, {
      type: 'RESET',
      by: 'heartbeat_monitor',
      reason: 'stale heartbeat: last heartbeat 9 s ago',
      attempt: 1,
    });
    await start(2, 'worker-2');
    await store.apply(id, {
      type: 'FAIL',
      attempt: 2,
      error: { message: 'archive unreachable', retryable: true },
    });
    await start(3, 'worker-1');
    await store.apply(id, {
      type: 'FAIL',
      attempt: 3,
      error: { message: 'checksum mismatch', retryable: false },
    });
    await store.apply(id, { type: 'RETRY', reason: 'archive fixed' }, { by: 'operator' });
    await start(4, 'worker-2');
    // A long-term archive completes with its VERIFIED record, made through the archive protocol.
    await store.complete(id, 4, [await verifiedArchiveOutput(database, id, 4)]);
    return id;
  }

  it('opstate inspect <id> --stately replays the stored path exactly, resets and retries included', async () => {
    const id = await walkedOperation();
    const relay = await relayWithReceiver();
    cleanups.push(() => relay.stop());
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l) };
    const inspect = createInspectCommand(async () => ({ ...database, close: async () => {} }));
    const code = await inspect.run([id, '--stately', '--inspect-url', relay.url], io);
    expect(code).toBe(0);
    const stored = await journal.listTransitions(id);
    expect(stored.map((t) => t.event)).toEqual([
      'CREATE',
      'SCHEDULE',
      'START',
      'RESET',
      'SCHEDULE',
      'START',
      'FAIL',
      'SCHEDULE',
      'START',
      'FAIL',
      'RETRY',
      'SCHEDULE',
      'START',
      'COMPLETE',
    ]);
    await waitFor(
      () => of(relay.received, id).length === 1 + 2 * stored.length,
      `the ${1 + 2 * stored.length} inspection events of ${id}`,
    );
    expectStoredPath(relay.received, id, stored);
    const last = of(relay.received, id).at(-1);
    const record = await store.load(id);
    expect(last?.type === '@xstate.snapshot' && last.snapshot).toMatchObject({
      status: 'done',
      value: 'COMPLETED',
      context: { attempt: record.attempt, retryCount: record.retryCount },
    });
    expect(lines.some((l) => l.includes('RESET') && l.includes('heartbeat_monitor'))).toBe(true);
  });

  it('the relay opstate runs serves the bridge page, forwards to receivers, and lets go of browsers when stopped', async () => {
    const id = await walkedOperation();
    const port = await freePort();
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l) };
    const inspection = await openStatelyInspection({ 'inspect-port': String(port) }, io);
    expect(inspection.page).toBe(`http://127.0.0.1:${port}`);
    expect(lines[0]).toContain(`open http://127.0.0.1:${port} in a browser`);
    const bridge = await (await fetch(inspection.page as string)).text();
    expect(bridge).toContain('<iframe id="inspector" src="https://stately.ai/inspect">');
    const received: StatelyInspectionEvent[] = [];
    const browser = new WebSocket(`ws://127.0.0.1:${port}`);
    const closed = new Promise<void>((r) => browser.once('close', () => r()));
    browser.on('message', (m) => received.push(JSON.parse(String(m))));
    await new Promise((r) => browser.once('open', r));
    await replayOperation(database, inspection.inspector, id);
    // Closing at once still delivers every event to the browser, then hangs up on it: nothing
    // keeps the process alive.
    await inspection.close();
    await closed;
    expectStoredPath(received, id, await journal.listTransitions(id));
  });

  it('an unreachable relay is an error that names the fix, and an unknown id is NOT_FOUND', async () => {
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l) };
    const inspect = createInspectCommand(async () => ({ ...database, close: async () => {} }));
    const port = await freePort();
    expect(
      await inspect.run(
        [await walkedOperation(), '--stately', '--inspect-url', `ws://localhost:${port}`],
        io,
      ),
    ).toBe(1);
    expect(lines.join('\n')).toMatch(/nothing accepts connections.*\[TRANSPORT\]/);
    const relay = await relayWithReceiver();
    cleanups.push(() => relay.stop());
    lines.length = 0;
    expect(
      await inspect.run(
        ['00000000-0000-4000-8000-000000000000', '--stately', '--inspect-url', relay.url],
        io,
      ),
    ).toBe(1);
    expect(lines.join('\n')).toMatch(/\[NOT_FOUND\]/);
    lines.length = 0;
    expect(await inspect.run([crypto.randomUUID(), '--inspect-port', '9'], io)).toBe(2);
    expect(lines.join('\n')).toMatch(/go with --stately/);
  });

  it('the live stream shows every operation as it moves, including one first seen mid-history and one committed out of order', async () => {
    const before = await store.create(inputFor(OperationKind.TRANSFER, world));
    await store.apply(before, { type: 'SCHEDULE' });
    const relay = await relayWithReceiver();
    cleanups.push(() => relay.stop());
    const inspector = createWebSocketInspector({ url: relay.url, maxDeferredEvents: 10_000 });
    cleanups.push(() => inspector.stop());
    const logger = memoryLogger();
    const stream = startInspectionStream({
      database,
      inspector,
      clock: systemClock,
      logger,
      intervalMs: 20,
    });
    cleanups.push(() => stream.stop());

    // A new operation, walked while the stream runs.
    const fresh = await store.create(inputFor(OperationKind.STAGING, world));
    await store.apply(fresh, { type: 'SCHEDULE' });
    await store.apply(fresh, { type: 'START', attempt: 1, workerId: 'worker-9' });
    await store.apply(fresh, { type: 'RESET', by: 'operator', reason: 'moved to another host' });
    // The one created before the stream started moves on: it is shown from its creation.
    await store.apply(before, { type: 'CANCEL', reason: 'superseded' });

    // A transition that takes its id first but commits after a later one has been streamed.
    const late = await store.create(inputFor(OperationKind.UNPACK, world));
    const peer = await openDatabase({ databaseUrl: testDb.url, max: 2 });
    cleanups.push(() => peer.close());
    let inserted!: () => void;
    let commit!: () => void;
    const afterInsert = new Promise<void>((r) => {
      inserted = r;
    });
    const gate = new Promise<void>((r) => {
      commit = r;
    });
    const held = peer.transaction(async (tx) => {
      await applyEvents(tx, [{ id: late, event: { type: 'SCHEDULE' } }], new Date());
      inserted();
      await gate;
    });
    await afterInsert;
    await store.apply(fresh, { type: 'SCHEDULE' });
    await waitFor(
      () => of(relay.received, fresh).length === 1 + 2 * 5,
      'the fresh operation to be streamed up to its second SCHEDULE',
    );
    commit();
    await held;

    for (const id of [fresh, before, late]) {
      const stored = await journal.listTransitions(id);
      await waitFor(
        () => of(relay.received, id).length === 1 + 2 * stored.length,
        `the ${1 + 2 * stored.length} inspection events of ${id}`,
        20_000,
        20,
        () =>
          JSON.stringify(
            of(relay.received, id).map((e) => [e.type, 'event' in e ? e.event : null]),
          ),
      );
      expectStoredPath(relay.received, id, stored);
    }
    expect(logger.lines.filter((l) => l.level !== 'DEBUG')).toEqual([]);
  });
});

describe('--inspect on control-plane and demo', () => {
  it('gives the inspector only with --inspect; its port or URL alone is a usage error', () => {
    expect(requestedInspection({})).toBeUndefined();
    expect(requestedInspection({ inspect: true, inspectPort: '9999' })).toEqual({
      'inspect-port': '9999',
      'inspect-url': undefined,
    });
    expect(() => requestedInspection({ inspectPort: '9999' })).toThrow(UsageError);
    expect(() => requestedInspection({ inspectUrl: 'ws://localhost:1' })).toThrow(
      '--inspect-port and --inspect-url go with --inspect',
    );
  });

  it('the control plane refuses --inspect-port without --inspect before it opens anything', async () => {
    const run = promisify(execFile);
    const err = await run(process.execPath, [BIN, 'control-plane', '--inspect-port', '9999'], {
      env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
    }).then(
      () => undefined,
      (e: { code?: number; stderr?: string }) => e,
    );
    expect(err?.code).toBe(2);
    expect(err?.stderr).toContain('--inspect-port and --inspect-url go with --inspect');
  });
});

const BIN = fileURLToPath(new URL('../../bin/opstate.js', import.meta.url));
