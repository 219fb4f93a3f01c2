import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
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

/** `store` whose `loadMany` fails as an unreachable database while `outage.down`, counting tries. */
function storeWithOutage(store: OperationStore, outage: { down: boolean; tries: number }) {
  return new Proxy(store, {
    get(target, key) {
      if (key !== 'loadMany') {
        // The store's own `this`: its private fields are not the proxy's.
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return (ids: string[]) => {
        if (!outage.down) return target.loadMany(ids);
        outage.tries++;
        const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
          code: 'ECONNREFUSED',
        });
        return Promise.reject(
          new OpstateError(OpstateErrorCode.DATABASE, `database error: ${cause.message}`, {
            retryable: true,
            cause,
          }),
        );
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
