import { describe, expect, it } from 'vitest';
import {
  relationBuffers,
  relationBuffersPer,
  reportStats,
} from '../../bench/lib/databaseBuffers.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { migratedDatabase } from '../helpers/migratedDatabase.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';

// One connection: the statements' counts are this backend's, flushed when the test asks.
const database = migratedDatabase({ prefix: 'opstate_relbufs', max: 1 });

describe('the e2e bench’s buffers by relation, on Postgres', () => {
  it('counts each table and index a run touched, partitions under their parent, with index scans', async () => {
    const db = database();
    const own = async (text: string) => db.execute(text);
    const world = await makeWorld(db);
    await reportStats(db);
    const before = await relationBuffers(own);
    await new OperationStore(db).createMany(
      Array.from({ length: 20 }, () => inputFor(OperationKind.TRANSFER, world)),
    );
    await reportStats(db);
    const after = await relationBuffers(own);

    // The history's partitions are read under the partitioned table's name, never their own.
    expect(after.has('operation_transition')).toBe(true);
    expect([...after.keys()].filter((name) => /^operation_transition_p\d/.test(name))).toEqual([]);
    // A table has no scans of its own; an index has.
    expect(after.get('operation')?.scans).toBeUndefined();
    expect(after.get('operation_pkey')?.scans).toBeGreaterThanOrEqual(0);

    const perOp = relationBuffersPer(before, after, 20);
    const of = (relation: string) => perOp.find((r) => r.relation === relation);
    expect(of('operation')?.buffers_per_op).toBeGreaterThan(0);
    expect(of('operation_transition')?.buffers_per_op).toBeGreaterThan(0);
    // Each creation's history row checks its operation by key: a probe of the primary key.
    expect(of('operation_pkey')?.scans_per_op).toBeGreaterThan(0);
    // Largest first, and nothing that read nothing.
    const buffers = perOp.map((r) => r.buffers_per_op);
    expect(buffers).toEqual([...buffers].sort((a, b) => b - a));
    expect(buffers.every((b) => b > 0)).toBe(true);
  });
});
