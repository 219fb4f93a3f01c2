import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from './harness.ts';

/**
 * The reconciler on the real Postgres and NATS with more operations in flight than one page of
 * its read holds: 1,100 operations IN_PROGRESS on a worker whose heartbeat (in the real bucket)
 * lists them all and stays fresh, and one started later by a worker that has no heartbeat at all,
 * so that it is the newest in flight, behind every page-full of healthy ones. The reconciler
 * finds it and resets it; it resets none of the others.
 */
const deploy = deploymentPerTest();
const HELD = 1_100;

describe('the reconciler with more in flight than a page', () => {
  it(`resets a lost operation behind ${HELD} that a live worker holds, and none of those`, async () => {
    // A room for every dispatch; the floor past the beat that lists the held ones.
    const dep = await deploy({ ...FAST_TIMING, maxScheduled: 2_000, reconcilerFloorMs: 6_000 });
    const rt = dep.runtime;
    const store = rt.store;
    const w = await makeWorld(rt.database);
    const held = await store.createMany(
      Array.from({ length: HELD }, () => inputFor(OperationKind.UNPACK, w)),
    );
    const walk = async (ids: string[], workerId: string) => {
      await store.applyMany(ids.map((id) => ({ id, event: { type: 'SCHEDULE' as const } })));
      await store.applyMany(
        ids.map((id) => ({ id, event: { type: 'START' as const, attempt: 1, workerId } })),
      );
    };
    await walk(held, 'w-long');
    const [lost] = await store.createMany([inputFor(OperationKind.UNPACK, w)]);
    await walk([lost as string], 'w-gone');

    // The live worker beats, listing everything it holds, for as long as the test runs.
    const list = held.map((operationId) => ({
      kind: OperationKind.UNPACK,
      operationId,
      attempt: 1,
    }));
    const beat = () => rt.transport.heartbeats.beat('w-long', list);
    await beat();
    const beating = setInterval(() => void beat().catch(() => undefined), 500);
    try {
      rt.startControlPlane();
      await waitFor(
        async () => (await store.load(lost as string)).attempt > 1,
        'the lost operation to be reset',
        60_000,
        250,
      );
      const resets = await rt.database.execute(sql`
        select operation_id::text as id, by from operation_transition where event = 'RESET'`);
      expect(resets).toEqual([{ id: lost, by: 'reconciler' }]);
      const counts = await store.countByKindAndStatus();
      expect(counts.unpack.IN_PROGRESS).toBe(HELD);
    } finally {
      clearInterval(beating);
    }
  }, 180_000);
});
