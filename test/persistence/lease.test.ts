import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { ObservedOperationStore } from '../../observe/ObservedOperationStore.ts';
import { fenceHolds } from '../../persistence/LeaseFence.ts';
import { LeaseRepository } from '../../persistence/LeaseRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { inputFor, makeWorld } from './fixtures.ts';

describe('the control-plane lease and its fence', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase(undefined, { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });
  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  it('an epoch granted a second time to another holder (a grant a failover lost) fences the first holder out', async () => {
    const leases = new LeaseRepository(database);
    const won = await leases.acquire('deploy-3', 'a', 60_000);
    const a = { name: 'deploy-3', epoch: won?.epoch ?? 0, holder: 'a' };
    expect(await leases.holds(a)).toBe(true);
    // What a promoted asynchronous standby that never received a's grant holds once it has
    // granted the same epoch to b.
    await database.execute(`update control_plane_lease set holder = 'b' where name = 'deploy-3'`);
    expect(await leases.holds(a)).toBe(false);
    // What every fenced write of the store checks (claims, resets, outbox deletions, breakers).
    expect(await fenceHolds(database, a)).toBe(false);
    expect(await leases.renew(a, 60_000)).toBeUndefined();
    await leases.release(a);
    expect(await leases.holds({ ...a, holder: 'b' })).toBe(true);
  });

  it('one holder at a time; a lapsed lease is taken under a new epoch and the old holder cannot renew it', async () => {
    const leases = new LeaseRepository(database);
    const a = await leases.acquire('deploy-1', 'a', 60_000);
    expect(a).toMatchObject({ holder: 'a', epoch: 1, expired: false });
    expect(await leases.acquire('deploy-1', 'b', 60_000)).toBeUndefined();
    expect(await leases.renew({ name: 'deploy-1', epoch: 1 }, 60_000)).toMatchObject({
      holder: 'a',
      epoch: 1,
    });
    // A short lease that lapses: the standby takes it, epoch 2.
    await leases.renew({ name: 'deploy-1', epoch: 1 }, 1);
    await waitFor(
      async () => (await leases.list()).some((l) => l.name === 'deploy-1' && l.expired),
      'the lease to lapse',
    );
    const b = await leases.acquire('deploy-1', 'b', 60_000);
    expect(b).toMatchObject({ holder: 'b', epoch: 2, expired: false });
    expect(await leases.renew({ name: 'deploy-1', epoch: 1 }, 60_000)).toBeUndefined();
    expect(await leases.holds({ name: 'deploy-1', epoch: 1 })).toBe(false);
    expect(await leases.holds({ name: 'deploy-1', epoch: 2 })).toBe(true);
    // A holder that stops ends its lease: the next acquire wins at once.
    await leases.release({ name: 'deploy-1', epoch: 2 });
    expect(await leases.acquire('deploy-1', 'c', 60_000)).toMatchObject({ epoch: 3 });
  });

  // The runtime's store (observed, for logs and metrics) must carry the fence exactly as the plain one.
  const stores: [string, (d: Database) => OperationStore][] = [
    ['the store', (d) => new OperationStore(d)],
    [
      'the runtime’s observed store',
      (d) => new ObservedOperationStore(d, { observer: { transitions: () => {} } }),
    ],
  ];
  it.each(stores)(
    'a stale epoch writes nothing through %s: no claim, no reset, no outbox deletion',
    async (label, storeOf) => {
      const leases = new LeaseRepository(database);
      const store = storeOf(database);
      const w = await makeWorld(database);
      const name = `deploy-2-${label.length}`;
      const old = await leases.acquire(name, 'old', 60_000);
      const stale = { name, epoch: old?.epoch ?? 0 };
      await leases.renew(stale, 1);
      await waitFor(async () => !(await leases.holds(stale)), 'the old leader’s lease to lapse');
      const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
      await expect(store.claimDue(10, stale)).rejects.toMatchObject({
        code: OpstateErrorCode.NOT_LEADER,
      });
      expect((await store.load(id)).status).toBe('PENDING');
      expect(await dispatchesAhead(store)).toEqual([]);

      const fresh = await leases.acquire(name, 'new', 60_000);
      const current = { name, epoch: fresh?.epoch ?? 0 };
      const { claimed } = await store.claimDue(10, current);
      expect(claimed.map((c) => c.id)).toEqual([id]);
      const outbox = await dispatchesAhead(store);
      const passed = Math.max(...outbox.map((o) => o.id));
      expect(outbox.map((o) => o.operationId)).toEqual([id]);
      // The relay's cursor moves only while its leader's lease holds.
      expect(await store.saveRelayCursor(passed, stale)).toBe(false);
      await expect(
        store.apply(
          id,
          { type: 'RESET', by: 'reconciler', reason: 'stale pass', attempt: 1 },
          { by: 'reconciler', fence: stale },
        ),
      ).rejects.toMatchObject({ code: OpstateErrorCode.NOT_LEADER });
      const after = await store.load(id);
      expect([after.status, after.attempt]).toEqual(['SCHEDULED', 1]);
      expect(await dispatchesAhead(store)).toHaveLength(1);
      expect(await store.saveRelayCursor(passed, current)).toBe(true);
      expect(await dispatchesAhead(store)).toEqual([]);
      await store.apply(
        id,
        { type: 'RESET', by: 'reconciler', reason: 'current pass', attempt: 1 },
        { by: 'reconciler', fence: current },
      );
      expect((await store.load(id)).status).toBe('PENDING');
      await store.apply(id, { type: 'CANCEL', reason: 'test done' }); // not due for the next store
    },
  );
});
