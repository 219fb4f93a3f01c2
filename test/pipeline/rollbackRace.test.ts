import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { createPipelineOperations } from '../../persistence/createPipelineOperations.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { selectRollbackFacts } from '../../persistence/reads/selectRollbackFacts.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { completedOperation, inputFor, makeWorld, type World } from '../persistence/fixtures.ts';

/**
 * A rollback and a pipeline pass that race on one completion, on the real Postgres, each held
 * open in its own transaction at the moment that matters: whichever commits first, the stage
 * after the completion is either not created (the rollback came first) or created and then seen
 * by the rollback, which redoes it too (the pass came first). Never created unseen.
 */
let testDb: TestDatabase;
let database: Database;
let store: OperationStore;

beforeAll(async () => {
  testDb = await createTestDatabase('opstate_rollback_race', { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  store = new OperationStore(database);
});
afterAll(async () => {
  await database?.close();
  if (testDb !== undefined) await dropTestDatabase(testDb);
});

/** A transfer of the world's bundle, COMPLETED: the completion the next stage follows. */
const completedTransfer = (w: World): Promise<string> =>
  completedOperation(store, inputFor(OperationKind.TRANSFER, w), [
    { artifactType: 'data_transfer_package', artifactId: w.dtp, locationId: w.buffer.id },
  ]);

/** Runs `body` in a transaction held open until the returned `commit` is called. */
function heldOpen(body: (tx: Database) => Promise<void>) {
  let commit: () => void = () => {};
  const released = new Promise<void>((r) => {
    commit = r;
  });
  let ready: () => void = () => {};
  const inside = new Promise<void>((r) => {
    ready = r;
  });
  const done = database.transaction(async (tx) => {
    await body(tx as unknown as Database);
    ready();
    await released;
  });
  return { inside, commit: () => commit(), done };
}

/** Whether some statement of this database waits on a row lock. */
const someoneWaits = async () => {
  const [row] = await database.execute(`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock'`);
  return Number(row?.n) > 0;
};

const operationsOf = async (kind: OperationKind) =>
  (await database.execute(`select id::text from operation where kind = '${kind}'`)).map((r) =>
    String(r.id),
  );

/** A packaging of `pkg` at the world's source, COMPLETED: its package copy there is its output. */
async function completedPackaging(w: World, pkg: string): Promise<{ id: string; copy: string }> {
  const id = await completedOperation(
    store,
    {
      kind: OperationKind.RAW_DATA_PACKAGE,
      fields: { rawDataPackageId: pkg, locationId: w.source.id },
    },
    [{ artifactType: 'raw_data_package', artifactId: pkg, locationId: w.source.id }],
  );
  const [row] = await database.execute(`select id::text from physical_copy
    where artifact_id = '${pkg}' and location_id = '${w.source.id}' and status = 'PRESENT'`);
  return { id, copy: String(row?.id) };
}

/**
 * A rollback `id` of `artifact` recorded, and its marking of `operationId` redone held open in a
 * transaction until `commit`.
 */
async function rollbackHeldOpen(r: {
  readonly id: string;
  readonly pipeline: string;
  readonly artifactType: string;
  readonly artifact: string;
  readonly stage: string;
  readonly operationId: string;
}) {
  await database.execute(`insert into pipeline_rollback
      (id, pipeline, artifact_type, artifact_id, stage, requested_by, plan)
    values ('${r.id}', '${r.pipeline}', '${r.artifactType}', '${r.artifact}', '${r.stage}', 'alice', '{}')`);
  const marking = heldOpen(async (tx) => {
    await tx.execute(
      `update operation set superseded_by = '${r.id}' where id = '${r.operationId}'`,
    );
  });
  await marking.inside;
  return marking;
}

describe('a rollback racing the pass that creates the next stage', () => {
  it('the rollback commits first: the pass, waiting on the completion, creates nothing from it', async () => {
    const w = await makeWorld(database);
    const transfer = await completedTransfer(w);
    const marking = await rollbackHeldOpen({
      id: '0190c3d2-0000-7000-8000-0000000000b1',
      pipeline: 'p1',
      artifactType: 'data_transfer_package',
      artifact: w.dtp,
      stage: 'transfer',
      operationId: transfer,
    });
    const pass = createPipelineOperations(database, {
      name: 'p1',
      operations: [
        { subjectId: w.dtp, input: inputFor(OperationKind.UNPACK, w), causeId: transfer },
      ],
      afterId: 7,
      now: new Date(),
    });
    await waitFor(someoneWaits, 'the pass to wait on the completion', 20_000);
    marking.commit();
    await marking.done;
    expect(await pass).toEqual([]);
    expect(await operationsOf(OperationKind.UNPACK)).toEqual([]);
    const [cursor] = await database.execute(
      `select after_id::int as n from pipeline_cursor where name = 'p1'`,
    );
    expect(cursor?.n).toBe(7);
  });

  it('the pass commits first: the rollback, waiting on the family, reads the stage it created', async () => {
    const w = await makeWorld(database);
    const transfer = await completedTransfer(w);
    let created = '';
    // The pass's write, held open: its cause locked FOR SHARE, the unpack inserted.
    const writing = heldOpen(async (tx) => {
      await tx.execute(`select id from operation where id = '${transfer}' for share`);
      created = await new OperationStore(tx).create(inputFor(OperationKind.UNPACK, w));
    });
    await writing.inside;
    const facts = database.transaction((tx) => selectRollbackFacts(tx, w.dtp, { lock: true }));
    await waitFor(someoneWaits, 'the rollback to wait on the family', 20_000);
    writing.commit();
    await writing.done;
    const ids = (await facts)?.operations.map((o) => o.id) ?? [];
    expect(ids).toContain(transfer);
    expect(created).not.toBe('');
    expect(ids).toContain(created);
  });
  it("a bundle caused by one member's packaging waits on a rollback of another member's, and follows its re-run", async () => {
    const w = await makeWorld(database);
    const other = await w.artifacts.addRawDataPackage({
      name: `rdp-${w.dtp}-2`,
      dataTransferPackageId: w.dtp,
    });
    const first = await completedPackaging(w, w.pkg);
    const second = await completedPackaging(w, other);
    const marking = await rollbackHeldOpen({
      id: '0190c3d2-0000-7000-8000-0000000000b2',
      pipeline: 'p2',
      artifactType: 'raw_data_package',
      artifact: other,
      stage: 'packaging',
      operationId: second.id,
    });
    // The bundle, due at the first member's completion: the second's copy is one of its inputs.
    const bundle = {
      subjectId: w.dtp,
      input: {
        ...inputFor(OperationKind.DATA_TRANSFER_PACKAGE, w),
        inputs: [first.copy, second.copy],
      },
      causeId: first.id,
    };
    const pass = createPipelineOperations(database, {
      name: 'p2',
      operations: [bundle],
      afterId: 9,
      now: new Date(),
    });
    await waitFor(someoneWaits, "the pass to wait on the other member's packaging", 20_000);
    marking.commit();
    await marking.done;
    expect(await pass).toEqual([]);
    expect(await operationsOf(OperationKind.DATA_TRANSFER_PACKAGE)).toEqual([]);

    // The re-run completes and finds the copy present: it stands on it again, so the bundle its
    // completion makes due is created.
    const rerun = await completedPackaging(w, other);
    expect(rerun.copy).toBe(second.copy);
    const created = await createPipelineOperations(database, {
      name: 'p2',
      operations: [{ ...bundle, causeId: rerun.id }],
      afterId: 10,
      now: new Date(),
    });
    expect(created).toHaveLength(1);
    expect(await operationsOf(OperationKind.DATA_TRANSFER_PACKAGE)).toEqual(created);
  });
});
