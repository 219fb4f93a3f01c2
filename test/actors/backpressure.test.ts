import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from './harness.ts';

const deploy = deploymentPerTest();

describe('the scheduler’s backpressure on a real deployment', () => {
  it('holds SCHEDULED work at maxScheduled pass after pass, counting it from the tally the writes keep', async () => {
    const MAX = 16;
    const dep = await deploy({ ...FAST_TIMING, maxScheduled: MAX });
    // What each scheduler pass was told is SCHEDULED (the store the control plane shares).
    const told: number[] = [];
    const count = dep.runtime.store.countScheduled.bind(dep.runtime.store);
    dep.runtime.store.countScheduled = async () => {
      const n = await count();
      told.push(n);
      return n;
    };
    const rows = async () => {
      const found = await dep.runtime.database.execute<{ status: string; n: number }>(
        'select status, count(*)::int as n from operation group by status',
      );
      return Object.fromEntries(found.map((r) => [r.status, Number(r.n)]));
    };

    const w = await makeWorld(dep.runtime.database);
    await dep.runtime.store.createMany(
      Array.from({ length: 100 }, () => inputFor(OperationKind.TRANSFER, w)),
    );
    dep.runtime.startControlPlane();
    // No worker runs: what is scheduled stays SCHEDULED, its dispatch waiting in the stream.
    await waitFor(async () => (await rows()).SCHEDULED === MAX, `${MAX} SCHEDULED`);
    const filled = told.length;
    await waitFor(() => told.length >= filled + 10, 'ten more scheduler passes');

    expect(await rows()).toEqual({ PENDING: 100 - MAX, SCHEDULED: MAX });
    // Every pass after the fill was told the true number, so none scheduled more.
    const after = told.slice(filled);
    expect(after.length).toBeGreaterThanOrEqual(10);
    expect(after).toEqual(after.map(() => MAX));
  });
});
