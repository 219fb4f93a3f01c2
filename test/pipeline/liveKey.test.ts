import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import { createPipelineOperations } from '../../persistence/createPipelineOperations.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, type World } from '../persistence/fixtures.ts';

// The pipeline's exactly-once on the real Postgres: `operation_pipeline_live_key` keeps one live
// operation per (kind, subject, target location) among those a pipeline marked, and leaves every
// operation a caller submitted (no subject) as it was.
describe('operation_pipeline_live_key', () => {
  let testDb: TestDatabase;
  let database: Database;
  let store: OperationStore;
  let world: World;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_pipe');
    database = await openDatabase({ databaseUrl: testDb.url, max: 2 });
    await migrate(database);
    store = new OperationStore(database);
    world = await makeWorld(database);
  });
  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  const mark = (id: string, subject: string) =>
    database.execute(`update operation set pipeline_subject_id = '${subject}' where id = '${id}'`);
  const setStatus = (id: string, status: string) =>
    database.execute(`update operation set status = '${status}' where id = '${id}'`);

  it('refuses a second live operation for the same (kind, subject, location)', async () => {
    const [a, b] = await store.createMany([
      inputFor(OperationKind.TRANSFER, world),
      inputFor(OperationKind.TRANSFER, world),
    ]);
    await mark(a as string, world.dtp);
    await expect(mark(b as string, world.dtp)).rejects.toThrow(/operation_pipeline_live_key/);
    // Each live status counts.
    for (const live of ['SCHEDULED', 'IN_PROGRESS']) {
      await setStatus(a as string, live);
      await expect(mark(b as string, world.dtp)).rejects.toThrow(/operation_pipeline_live_key/);
    }
    // Once the first is no longer live, a second may be.
    await setStatus(a as string, 'COMPLETED');
    await mark(b as string, world.dtp);
    // And a retry that would bring the first back to life beside it is refused.
    await expect(setStatus(a as string, 'PENDING')).rejects.toThrow(/operation_pipeline_live_key/);
  });

  it('keys on the kind and the location: other kinds and locations are apart', async () => {
    const other = await world.artifacts.addLocation({
      site: world.buffer.site,
      name: 'buffer-2',
      locationType: LocationType.BUFFER,
      storageRoot: '/data/buffer-2',
    });
    const [t, u] = await store.createMany([
      {
        kind: OperationKind.TRANSFER,
        fields: {
          dataTransferPackageId: world.dtp,
          sourceLocationId: world.source.id,
          destinationLocationId: other.id,
        },
      },
      inputFor(OperationKind.UNPACK, world),
    ]);
    await mark(t as string, world.dtp);
    await mark(u as string, world.dtp);
  });

  it('leaves operations a caller submitted (no subject) as before: duplicates allowed', async () => {
    const ids = await store.createMany(
      Array.from({ length: 3 }, () => inputFor(OperationKind.LONG_TERM_ARCHIVE, world)),
    );
    expect(ids).toHaveLength(3);
    const [row] = await database.execute(
      `select count(*)::int as n from operation where id in (${ids.map((i) => `'${i}'`).join(', ')}) and status = 'PENDING'`,
    );
    expect(row?.n).toBe(3);
  });
});

describe('createPipelineOperations', () => {
  let testDb: TestDatabase;
  let database: Database;
  let world: World;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_pipe');
    database = await openDatabase({ databaseUrl: testDb.url, max: 2 });
    await migrate(database);
    world = await makeWorld(database);
  });
  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  const cursor = async () => {
    const [row] = await database.execute(
      `select after_id::int as n from pipeline_cursor where name = 'p'`,
    );
    return row?.n;
  };

  it('creates the operations marked with their subject and moves the cursor, together', async () => {
    const operations = [{ subjectId: world.dtp, input: inputFor(OperationKind.UNPACK, world) }];
    const [id] = await createPipelineOperations(database, {
      name: 'p',
      operations,
      afterId: 7,
      now: new Date(),
    });
    const [row] = await database.execute(
      `select pipeline_subject_id::text as s, status from operation where id = '${id}'`,
    );
    expect(row).toEqual({ s: world.dtp, status: 'PENDING' });
    expect(await cursor()).toBe(7);

    // A second pass deciding the same (a repeat after a crash, a racing leader): refused whole.
    await expect(
      createPipelineOperations(database, { name: 'p', operations, afterId: 9, now: new Date() }),
    ).rejects.toMatchObject({
      code: OpstateErrorCode.CONFLICT,
      message: expect.stringContaining("pipeline 'p': a live operation"),
    });
    expect(await cursor()).toBe(7);
    const [n] = await database.execute(
      `select count(*)::int as n from operation where pipeline_subject_id = '${world.dtp}'`,
    );
    expect(n?.n).toBe(1);
  });
});
