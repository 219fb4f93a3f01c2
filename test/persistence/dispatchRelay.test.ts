import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationEvent } from '../../machines/operationMachine.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { planTransition } from '../../persistence/planTransition.ts';
import { DISPATCH_WRITE_LOCK } from '../../persistence/sql/dispatchRelay.ts';
import { writeTransitions } from '../../persistence/sql/writeTransitions.ts';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from './fixtures.ts';

/**
 * The dispatch relay reads the SCHEDULE transitions past its cursor. Identity ids are drawn at
 * insert and become visible at commit, so a claim that commits late has a lower id than one that
 * committed before it: the relay's barrier must not let the cursor pass it.
 */
describe('the dispatch relay’s barrier on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ databaseUrl: testDb.url, max: 6 });
    await migrate(database);
  });
  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  /** Advisory locks on the dispatch write lock's key that are waited for, not held. */
  const waitingOnBarrier = async () => {
    const [row] = await database.execute(`
      select count(*)::int as n from pg_locks
      where locktype = 'advisory' and not granted
        and ((classid::bigint << 32) | objid::bigint) = ${DISPATCH_WRITE_LOCK}`);
    return Number(row?.n ?? 0);
  };

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
    const done = database.transaction(async (tx) => {
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
    const store = new OperationStore(database);
    const w = await makeWorld(database);
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

    // The barrier waits for the open claim…
    let upTo: number | undefined;
    const barrier = store.dispatchBarrier().then((id) => {
      upTo = id;
    });
    await waitFor(async () => (await waitingOnBarrier()) === 1, 'the barrier to wait');
    expect(upTo).toBeUndefined();
    // …and, once it commits, everything up to the barrier is final: both dispatches, in id order.
    await open.commit();
    await barrier;
    const read = await store.fetchDispatches(after, upTo ?? 0, 10);
    expect(read.map((e) => e.operationId)).toEqual([early, late]);
    expect((await dispatchesAhead(store)).map((e) => e.operationId)).toEqual([early, late]);
  });

  it('a transition that dispatches nothing takes no lock: the barrier does not wait for it', async () => {
    const store = new OperationStore(database);
    const w = await makeWorld(database);
    const [id] = (await store.createMany([inputFor(OperationKind.TRANSFER, w)])) as [string];
    await store.claimDue(1);
    const open = await writeHeldOpen(store, id, { type: 'START', attempt: 1, workerId: 'w' });
    const upTo = await store.dispatchBarrier();
    expect(upTo).toBeGreaterThan(0);
    await open.commit();
  });
});
