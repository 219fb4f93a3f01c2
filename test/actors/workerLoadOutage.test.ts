import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { OperationStore } from '../../persistence/OperationStore.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import type { TransportEvent } from '../../transport/Transport.ts';
import { startWorker } from '../../worker/Worker.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';

/**
 * A worker that receives a dispatch while Postgres cannot be reached (a primary killed, its
 * standby not promoted yet) holds it and waits, then starts it once the database answers: it
 * does not hand it back to the broker, whose redelivery of a dispatch naked with a delay
 * nats-server 2.9 could lose during a failover (the operation then waited SCHEDULED for the
 * reconciler's floor; test/actors/pgFailover.test.ts). The real Postgres behind a store whose
 * reads of operations fail as an outage while `down` is set; the in-process transport.
 */
let db: TestDatabase;
let runtime: Runtime;
const logger = memoryLogger();

beforeAll(async () => {
  db = await createTestDatabase('opstate_load_outage');
  runtime = await createRuntime({ databaseUrl: db.url, logger });
});
afterAll(async () => {
  await runtime?.close();
  await dropTestDatabase(db);
});

/** The error a read of an unreachable database gives. */
function unreachable(): OpstateError {
  const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
    code: 'ECONNREFUSED',
  });
  return new OpstateError(OpstateErrorCode.DATABASE, `database error: ${cause.message}`, {
    retryable: true,
    cause,
  });
}

/**
 * `store` whose `method` fails as an unreachable database while `outage.down`, counting tries;
 * everything else is the store's own.
 */
function storeWithOutage(
  store: OperationStore,
  outage: { down: boolean; tries: number },
  method: 'loadMany' | 'routedLocations' = 'loadMany',
): OperationStore {
  return new Proxy(store, {
    get(target, key) {
      // The store's own `this`: its private fields are not the proxy's.
      const value = Reflect.get(target, key, target);
      const own = typeof value === 'function' ? value.bind(target) : value;
      if (key !== method) return own;
      return (...args: unknown[]) => {
        if (!outage.down) return own(...args);
        outage.tries++;
        return Promise.reject(unreachable());
      };
    },
  });
}

describe('a dispatch received while Postgres is unreachable', () => {
  it('is held by the worker and started once the database answers, never handed back', async () => {
    const w = await makeWorld(runtime.database);
    const outage = { down: true, tries: 0 };
    const handedBack: TransportEvent[] = [];
    const off = runtime.transport.onEvent((e) => {
      if (e.type === 'handler_error') handedBack.push(e);
    });
    const plane = runtime.startControlPlane();
    const worker = startWorker({
      store: storeWithOutage(runtime.store, outage),
      journal: runtime.journal,
      transport: runtime.transport,
      clock: systemClock,
      logger,
      deadlines: runtime.timing.deadlines,
      kinds: [OperationKind.TRANSFER],
      handlers: {
        [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await ctx.requiredOutputs() }),
      },
    });
    const id = await runtime.submit(inputFor(OperationKind.TRANSFER, w));
    // The worker has the dispatch and has tried to read its operation a few times.
    await waitFor(() => outage.tries >= 3, 'the worker to try reading the operation', 30_000);
    expect(handedBack).toEqual([]);
    outage.down = false;
    await waitFor(
      async () => (await runtime.store.load(id)).status === 'COMPLETED',
      'the operation to complete',
      30_000,
    );
    const view = await runtime.get(id);
    // Started by the worker that held it, under the first attempt: nothing was reset.
    expect(view).toMatchObject({ status: 'COMPLETED', attempt: 1 });
    expect(handedBack).toEqual([]);
    expect(
      logger.lines.some(
        (l) =>
          l.message === `Postgres (loading operation ${id}) reachable; going on` &&
          l.level === 'INFO',
      ),
    ).toBe(true);
    off();
    await worker.stop();
    await plane.stop();
  });
});

describe('a worker whose looks for new locations fail', () => {
  it('says so once when they start failing and once when they work again, and reads a location registered meanwhile', async () => {
    const w = await makeWorld(runtime.database);
    const site = w.buffer.site;
    const outage = { down: false, tries: 0 };
    const store = storeWithOutage(runtime.store, outage, 'routedLocations');
    const own = memoryLogger();
    const worker = startWorker({
      store,
      journal: runtime.journal,
      transport: runtime.transport,
      clock: systemClock,
      logger: own,
      deadlines: runtime.timing.deadlines,
      kinds: [OperationKind.TRANSFER],
      site,
      discoveryIntervalMs: 20,
      handlers: {
        [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await ctx.requiredOutputs() }),
      },
    });
    await waitFor(
      () => own.lines.some((l) => l.message === 'worker started'),
      'the worker to start',
      30_000,
    );
    outage.down = true;
    await waitFor(() => outage.tries >= 5, 'several failed looks', 30_000);
    await runtime.artifacts.addLocation({
      site,
      name: 'later',
      locationType: LocationType.BUFFER,
      storageRoot: '/data/later',
    });
    outage.down = false;
    const readsLater = () =>
      own.lines.some(
        (l) =>
          l.message === 'worker reads new queues' &&
          JSON.stringify(l.fields).includes(`${site}_later_buffer_`),
      );
    await waitFor(
      readsLater,
      'the worker to read the location registered during the outage',
      30_000,
    );
    const said = own.lines.filter((l) => l.message.includes('look'));
    const failed = said.filter((l) => l.message === 'worker could not look for new queues');
    expect(failed.length).toBeGreaterThanOrEqual(5);
    expect(failed.filter((l) => l.level === 'WARNING')).toHaveLength(1);
    expect(failed[0]?.level).toBe('WARNING');
    expect(failed.slice(1).every((l) => l.level === 'DEBUG')).toBe(true);
    const again = said.filter((l) => l.message === 'worker looks for new queues again');
    expect(again).toHaveLength(1);
    expect(again[0]?.level).toBe('INFO');
    await worker.stop();
  });
});
