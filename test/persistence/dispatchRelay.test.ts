import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationEvent } from '../../machines/operationMachine.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { planTransition } from '../../persistence/planTransition.ts';
import { writeTransitions } from '../../persistence/sql/writeTransitions.ts';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { migratedDatabase } from '../helpers/migratedDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from './fixtures.ts';

/**
 * The dispatch relay reads the SCHEDULE transitions past its cursor. Identity ids are drawn at
 * insert and become visible at commit, so a claim that commits late has a lower id than one that
 * committed before it: the relay's barrier must not let the cursor pass it.
 */
describe('the dispatch relay’s barrier on Postgres', () => {
  const db = migratedDatabase({ max: 6 });

  /**
   * Writes `event` on operation `id` as the store does, in a transaction left open until
   * `commit()` is called: its transition id is drawn, not yet visible.
   */
  const writeHeldOpen = async (store: OperationStore, id: string, event: OperationEvent) => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let written = false;
    const done = db().transaction(async (tx) => {
      const { write } = planTransition(await store.load(id), event, new Date());
      expect(await writeTransitions(tx, [write])).toHaveLength(1);
      written = true;
      await held;
    });
    await waitFor(async () => written, `the ${event.type} to be written`);
    return {
      commit: async () => {
        release();
        await done;
      },
    };
  };

  it('waits for a claim still open, so its lower id is read once it commits, never stepped over', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const [early, late] = (await store.createMany([
      inputFor(OperationKind.TRANSFER, w),
      inputFor(OperationKind.TRANSFER, w),
    ])) as [string, string];
    const { after } = await store.relayPosition();

    // A claim of `early` that draws its transition id and then stays open.
    const open = await writeHeldOpen(store, early, { type: 'SCHEDULE' });
    // A claim of `late` commits meanwhile, with the higher id: the newest visible is past `early`.
    expect((await store.claimDue(1)).claimed.map((c) => c.id)).toEqual([late]);
    const visible = await store.fetchDispatches(after, Number.MAX_SAFE_INTEGER, 10);
    expect(visible.map((e) => e.operationId)).toEqual([late]);

    // The barrier is refused while the claim is open (at once: it never queues the claims
    // behind it)…
    expect(await store.dispatchBarrier()).toBeUndefined();
    // …and, once it commits, everything up to the barrier is final: both dispatches, in id order.
    await open.commit();
    const upTo = await store.dispatchBarrier();
    expect(upTo).toBeDefined();
    const read = await store.fetchDispatches(after, upTo ?? 0, 10);
    expect(read.map((e) => e.operationId)).toEqual([early, late]);
    expect((await dispatchesAhead(store)).map((e) => e.operationId)).toEqual([early, late]);
  });

  it('a claim frozen in its transaction stops neither another claim nor the barrier’s callers', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const [frozen, next] = (await store.createMany([
      inputFor(OperationKind.TRANSFER, w),
      inputFor(OperationKind.TRANSFER, w),
    ])) as [string, string];
    const open = await writeHeldOpen(store, frozen, { type: 'SCHEDULE' });
    expect(await store.dispatchBarrier()).toBeUndefined();
    // A claim after the refused barrier goes through (a waiting exclusive request would hold it).
    expect((await store.claimDue(1)).claimed.map((c) => c.id)).toEqual([next]);
    await open.commit();
    expect(await store.dispatchBarrier()).toBeDefined();
  });

  it('a transition that dispatches nothing takes no lock: the barrier is granted while it is open', async () => {
    const store = new OperationStore(db());
    const w = await makeWorld(db());
    const [id] = (await store.createMany([inputFor(OperationKind.TRANSFER, w)])) as [string];
    await store.claimDue(1);
    const open = await writeHeldOpen(store, id, { type: 'START', attempt: 1, workerId: 'w' });
    expect(await store.dispatchBarrier()).toBeGreaterThan(0);
    await open.commit();
  });
});
