import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { ObservedOperationStore } from '../../observe/ObservedOperationStore.ts';
import type { ObservedTransition } from '../../observe/RuntimeObserver.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { requiredOutputsOf } from '../../persistence/requiredOutputsOf.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, type World } from '../persistence/fixtures.ts';

/**
 * A worker's observed store remembers the kind of each attempt it started, to report the
 * completion. Operations reset away from the worker by a control plane in another process used to
 * stay remembered for ever: its completion or failure is refused, and the entry was dropped only
 * on success. On the real Postgres, with the control plane's writes through a store of its own.
 */
let testDb: TestDatabase;
let database: Database;
let world: World;

beforeAll(async () => {
  testDb = await createTestDatabase(undefined, { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url, max: 4 });
  await migrate(database);
  world = await makeWorld(database);
});

afterAll(async () => {
  await database?.close();
  await dropTestDatabase(testDb);
});

/** `n` transfers, scheduled by the control plane and started by the worker's store. */
async function started(worker: ObservedOperationStore, control: OperationStore, n: number) {
  const ids = await control.createMany(
    Array.from({ length: n }, () => inputFor(OperationKind.TRANSFER, world)),
  );
  for (const id of ids) {
    await control.apply(id, { type: 'SCHEDULE' });
    await worker.apply(id, { type: 'START', attempt: 1, workerId: 'w-1' }, { by: 'w-1' });
  }
  return ids;
}

describe('the observed store of a worker', () => {
  it('forgets every attempt reset away from it once its completion or failure is refused', async () => {
    const seen: ObservedTransition[] = [];
    const worker = new ObservedOperationStore(database, {
      observer: { transitions: (t) => seen.push(...t) },
    });
    const control = new OperationStore(database);
    const ids = await started(worker, control, 40);
    expect(worker.trackedAttempts).toBe(40);
    for (const id of ids) {
      await control.apply(id, {
        type: 'RESET',
        by: 'heartbeat_monitor',
        reason: 'no heartbeat',
        attempt: 1,
      });
    }
    const [completing, failing] = [ids.slice(0, 20), ids.slice(20)];
    const results = await worker.completeMany(
      completing.map((id) => ({ id, attempt: 1, outputs: [] })),
    );
    expect(results.every((r) => !r.ok)).toBe(true);
    for (const id of failing) {
      await expect(
        worker.apply(id, {
          type: 'FAIL',
          attempt: 1,
          error: { message: 'late', retryable: true },
        }),
      ).rejects.toThrow();
    }
    expect(worker.trackedAttempts).toBe(0);
    expect(seen.filter((t) => t.event === 'COMPLETE' || t.event === 'FAIL')).toEqual([]);
  });

  it('remembers at most maxTracked attempts, the newest, and still reports their completions', async () => {
    const seen: ObservedTransition[] = [];
    const worker = new ObservedOperationStore(database, {
      observer: { transitions: (t) => seen.push(...t) },
      maxTracked: 10,
    });
    const control = new OperationStore(database);
    const ids = await started(worker, control, 25);
    expect(worker.trackedAttempts).toBe(10);
    const newest = ids.at(-1) as string;
    const outputs = await requiredOutputsOf(database, newest);
    const [done] = await worker.completeMany([{ id: newest, attempt: 1, outputs }]);
    expect(done?.ok).toBe(true);
    expect(seen.filter((t) => t.event === 'COMPLETE')).toEqual([
      expect.objectContaining({ operationId: newest, kind: OperationKind.TRANSFER }),
    ]);
    expect(worker.trackedAttempts).toBe(9);
  });
});
