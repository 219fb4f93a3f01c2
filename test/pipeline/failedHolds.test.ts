import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttentionCategory } from '../../machines/attention.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { loadAttention } from '../../persistence/loadAttention.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, type World } from '../persistence/fixtures.ts';

/**
 * The attention list says what waits on a pipeline stage that failed for good: the packages whose
 * branch it stops, read from the facts on the real Postgres (the bundle's members), only where a
 * declared pipeline runs, and never for an operation a rollback redoes.
 */
let testDb: TestDatabase;
let database: Database;
let store: OperationStore;
let w: World;
const timing = {
  heartbeatTimeoutMs: 60_000,
  reconcilerFloorMs: 3_600_000,
  deadlines: DEFAULT_DEADLINES_MS,
};

beforeAll(async () => {
  testDb = await createTestDatabase('opstate_failed_holds', { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  store = new OperationStore(database);
  w = await makeWorld(database);
  // Three packages in the world's data transfer package, and one in no bundle.
  for (let i = 0; i < 2; i++)
    await w.artifacts.addRawDataPackage({ name: `member-${i}`, dataTransferPackageId: w.dtp });
});
afterAll(async () => {
  await database?.close();
  if (testDb !== undefined) await dropTestDatabase(testDb);
});

/** An operation of `kind` walked to FAILED by a non-retryable error. */
async function failed(kind: OperationKind, input = inputFor(kind, w)): Promise<string> {
  const id = await store.create(input);
  await store.apply(id, { type: 'SCHEDULE' });
  await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-1' });
  await store.apply(id, {
    type: 'FAIL',
    attempt: 1,
    error: { message: 'disk full', retryable: false },
  });
  return id;
}

const failedItems = async () => {
  const list = await loadAttention(database, {
    now: Date.now(),
    timing,
    heartbeats: null,
    category: AttentionCategory.FAILED,
  });
  return list.sections[0]?.items ?? [];
};

describe('what waits on a stage that failed for good', () => {
  it('nothing is said without a pipeline; with one, each failed stage names the packages it holds back', async () => {
    const transfer = await failed(OperationKind.TRANSFER);
    const archive = await failed(OperationKind.LONG_TERM_ARCHIVE);
    const packaging = await failed(OperationKind.RAW_DATA_PACKAGE);
    const alone = await w.artifacts.addRawDataPackage({ name: 'alone' });
    const lonePackaging = await failed(OperationKind.RAW_DATA_PACKAGE, {
      kind: OperationKind.RAW_DATA_PACKAGE,
      fields: { rawDataPackageId: alone, locationId: w.source.id },
    });

    // No pipeline has run here: a failure stops no branch, and none is claimed.
    const before = await failedItems();
    expect(before.map((i) => i.subject.id).sort()).toEqual(
      [transfer, archive, packaging, lonePackaging].sort(),
    );
    for (const item of before) {
      expect(item.waiting).toBeUndefined();
      expect(item.why).not.toMatch(/wait on it/);
    }

    // A declared pipeline's pass has run (its cursor exists).
    await database.execute(
      `insert into pipeline_cursor (name, after_id) values ('preservation', 0)`,
    );
    const items = new Map((await failedItems()).map((i) => [i.subject.id, i]));
    expect(items.get(transfer)?.waiting).toEqual({
      packages: 3,
      dataTransferPackageId: w.dtp,
      rawDataPackageId: null,
    });
    expect(items.get(transfer)?.why).toMatch(
      new RegExp(
        `^FAILED at attempt 1: disk full; .*; 3 packages wait on it \\(data transfer package ${w.dtp}\\): the pipeline creates none of their later stages until it is retried$`,
      ),
    );
    // A packaging holds back its whole bundle: bundling waits for every member.
    expect(items.get(packaging)?.waiting).toEqual({
      packages: 3,
      dataTransferPackageId: w.dtp,
      rawDataPackageId: w.pkg,
    });
    expect(items.get(archive)?.waiting).toEqual({
      packages: 1,
      dataTransferPackageId: null,
      rawDataPackageId: w.pkg,
    });
    expect(items.get(archive)?.why).toMatch(/; 1 package waits on it \(raw data package /);
    expect(items.get(lonePackaging)?.waiting).toEqual({
      packages: 1,
      dataTransferPackageId: null,
      rawDataPackageId: alone,
    });
  });

  it('an operation a rollback redoes holds back nothing: its re-run is what the branch waits for', async () => {
    const unpack = await failed(OperationKind.UNPACK);
    const rollback = '0190c3d2-0000-7000-8000-0000000000aa';
    await database.execute(`insert into pipeline_rollback
        (id, pipeline, artifact_type, artifact_id, stage, requested_by, plan)
      values ('${rollback}', 'preservation', 'data_transfer_package', '${w.dtp}', 'unpack',
        'operator:alice', '{}')`);
    const before = new Map((await failedItems()).map((i) => [i.subject.id, i]));
    expect(before.get(unpack)?.waiting?.packages).toBe(3);
    await database.execute(
      `update operation set superseded_by = '${rollback}' where id = '${unpack}'`,
    );
    const after = new Map((await failedItems()).map((i) => [i.subject.id, i]));
    expect(after.get(unpack)?.waiting).toBeUndefined();
  });
});
