import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';

let db: TestDatabase;
let runtime: Runtime;
beforeAll(async () => {
  db = await createTestDatabase('opstate_runtime');
  // No natsUrl: the in-process transport, on the real Postgres.
  runtime = await createRuntime({ databaseUrl: db.url, maxRetries: 1 });
});
afterAll(async () => {
  await runtime?.close();
  await dropTestDatabase(db);
});

describe('createRuntime', () => {
  it('applies its maxRetries to operations that do not name one', async () => {
    const w = await makeWorld(runtime.database);
    const [a, b] = await runtime.submitMany([
      inputFor(OperationKind.TRANSFER, w),
      { ...inputFor(OperationKind.UNPACK, w), maxRetries: 5 },
    ]);
    expect((await runtime.store.load(a as string)).maxRetries).toBe(1);
    expect((await runtime.store.load(b as string)).maxRetries).toBe(5);
    expect(
      (await runtime.store.load(await runtime.submit(inputFor(OperationKind.STAGING, w))))
        .maxRetries,
    ).toBe(1);
  });

  it('records who submitted: the call’s `by`, else the service name (package.json here)', async () => {
    const w = await makeWorld(runtime.database);
    expect(runtime.serviceName).toBe('opstate');
    const byService = await runtime.submit(inputFor(OperationKind.TRANSFER, w));
    const [byIngest, byCron] = await runtime.submitMany([
      { ...inputFor(OperationKind.UNPACK, w), by: 'ingest' },
      { ...inputFor(OperationKind.STAGING, w), by: 'cron@host-1' },
    ]);
    const creator = async (id: string | undefined) =>
      (await runtime.get(id as string)).transitions.map((t) => `${t.event} by ${t.by}`);
    expect(await creator(byService)).toEqual(['CREATE by opstate']);
    expect(await creator(byIngest)).toEqual(['CREATE by ingest']);
    expect(await creator(byCron)).toEqual(['CREATE by cron@host-1']);
  });

  it('takes its service name from the option or OPSTATE_SERVICE_NAME, and refuses a bad one', async () => {
    const named = await createRuntime({
      databaseUrl: db.url,
      env: { OPSTATE_SERVICE_NAME: '@acme/ingest' },
      migrate: false,
    });
    try {
      expect(named.serviceName).toBe('@acme/ingest');
      const w = await makeWorld(named.database);
      const id = await named.submit(inputFor(OperationKind.TRANSFER, w));
      expect((await named.get(id)).transitions[0]?.by).toBe('@acme/ingest');
      // Bad input changes nothing.
      await expect(
        named.submit({ ...inputFor(OperationKind.TRANSFER, w), by: 'two words' }),
      ).rejects.toThrow(
        expect.objectContaining({
          code: OpstateErrorCode.BAD_INPUT,
          message: expect.stringMatching(/^by must be 1 to 64 characters of letters, digits/),
        }),
      );
    } finally {
      await named.close();
    }
    await expect(createRuntime({ databaseUrl: db.url, serviceName: 'reconciler' })).rejects.toThrow(
      "the option serviceName (as OPSTATE_SERVICE_NAME) must be 1 to 64 characters of letters, digits and . _ : @ / -, other than scheduler, heartbeat_monitor, deadline, reconciler, broker (default: the package.json name, else service); got 'reconciler' (it is one of opstate's own actors)",
    );
    await expect(
      createRuntime({ databaseUrl: db.url, env: { OPSTATE_SERVICE_NAME: 'my service' } }),
    ).rejects.toThrow(
      expect.objectContaining({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringMatching(
          /^OPSTATE_SERVICE_NAME must be 1 to 64 characters .*; got 'my service' \(it contains " "\)$/,
        ),
      }),
    );
  });

  it('says which mode it runs in, and refuses an embedded run given server URLs', async () => {
    expect(runtime.mode).toEqual({ database: 'postgres', transport: 'in-process' });
    await expect(createRuntime({ embedded: true, databaseUrl: db.url })).rejects.toMatchObject({
      code: OpstateErrorCode.CONFIG,
    });
  });

  it('lets an operator send only operator events', async () => {
    const w = await makeWorld(runtime.database);
    const id = await runtime.submit(inputFor(OperationKind.TRANSFER, w));
    await expect(runtime.command(id, { type: 'COMPLETE', attempt: 1 })).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
    });
    const cancelled = await runtime.command(id, { type: 'CANCEL', reason: 'not needed' });
    expect(cancelled.status).toBe('FAILED');
  });
});

describe('worker ids', () => {
  it('a second worker under the id of a live one is refused at start with CONFIG naming the id, and takes no work', async () => {
    const handlers = { [OperationKind.TRANSFER]: async () => ({ outputs: [] }) };
    const first = runtime.startWorker({
      kinds: [OperationKind.TRANSFER],
      handlers,
      workerId: 'dup-7',
    });
    await first.ready;
    // Idle, its heartbeat already says which queues it reads: without a site, every site's
    // transfer queues and the legacy one.
    expect(first.queues()).toContain('source_data_transfer');
    expect(
      (await runtime.transport.heartbeats.list()).find((b) => b.workerId === 'dup-7'),
    ).toMatchObject({
      held: [],
      reads: { queues: first.queues(), kinds: [OperationKind.TRANSFER] },
    });
    const consuming = runtime.transport.openSubscriptions;
    const second = runtime.startWorker({
      kinds: [OperationKind.TRANSFER],
      handlers,
      workerId: 'dup-7',
    });
    try {
      await expect(second.ready).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringMatching(/Worker id "dup-7" is in use/),
      });
      expect(runtime.transport.openSubscriptions).toBe(consuming);
      await second.stop();
      // The refused one never wrote the key, nor removed it.
      const beats = await runtime.transport.heartbeats.list();
      expect(beats.filter((b) => b.workerId === 'dup-7')).toHaveLength(1);
    } finally {
      await second.stop();
      await first.stop();
    }
    // Stopped cleanly, the first removed its heartbeat: the id is free at once.
    const again = runtime.startWorker({
      kinds: [OperationKind.TRANSFER],
      handlers,
      workerId: 'dup-7',
    });
    await again.ready;
    await again.stop();
  });
});

describe('embedded transport after a restart', () => {
  it('re-dispatches what was SCHEDULED, since in-process messages die with the process', async () => {
    const w = await makeWorld(runtime.database);
    const id = await runtime.submit(inputFor(OperationKind.TRANSFER, w));
    // The previous process claimed and published it into its in-memory queue, then died.
    const { claimed } = await runtime.store.claimDue(10);
    expect(claimed.map((c) => c.id)).toContain(id);
    // …and its relay passed them: nothing is left for a relay to publish.
    const ahead = await dispatchesAhead(runtime.store);
    await runtime.store.saveRelayCursor(Math.max(...ahead.map((e) => e.id)));

    const restarted = await createRuntime({ databaseUrl: db.url });
    try {
      restarted.startWorker({
        kinds: [OperationKind.TRANSFER],
        handlers: {
          [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await ctx.requiredOutputs() }),
        },
      });
      restarted.startControlPlane();
      const deadline = Date.now() + 30_000;
      while ((await restarted.store.load(id)).status !== 'COMPLETED') {
        if (Date.now() > deadline) throw new Error('the scheduled operation was not re-dispatched');
        await new Promise((r) => setTimeout(r, 50));
      }
      const view = await restarted.get(id);
      expect(view.transitions.map((t) => t.event)).toEqual([
        'CREATE',
        'SCHEDULE',
        'START',
        'COMPLETE',
      ]);
    } finally {
      await restarted.close();
    }
  });
});
