import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { selectTransitionsAfter } from '../../persistence/sql/selectTransitions.ts';
import { measuringBuffers } from '../helpers/explainBuffers.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, type World } from './fixtures.ts';

// Statements whose cost must not grow with the tables, held to a count of buffers touched (which
// does not depend on the machine's speed) with the tables grown and their statistics left old.
describe('hot statements on Postgres, over grown tables', () => {
  let testDb: TestDatabase;
  let database: Database;
  let world: World;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
    world = await makeWorld(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  /** New packages, each archived by one operation, driven to IN_PROGRESS. */
  async function runningArchives(n: number) {
    const store = new OperationStore(database);
    const packages = await database.execute<{ id: string }>(
      sql`insert into raw_data_package (name)
          select 'scaling-' || gen_random_uuid() from generate_series(1, ${n}) returning id`,
    );
    const ids = await store.createMany(
      packages.map((p) => ({
        kind: OperationKind.LONG_TERM_ARCHIVE,
        fields: {
          rawDataPackageId: String(p.id),
          sourceLocationId: world.source.id,
          destinationLocationId: world.archive.id,
        },
      })),
    );
    const { claimed } = await store.claimDue(n);
    expect(claimed.map((c) => c.id).sort()).toEqual([...ids].sort());
    await store.applyMany(
      claimed.map((c) => ({
        id: c.id,
        event: { type: 'START', attempt: c.attempt, workerId: 'w' },
      })),
    );
    const byOperation = await database.execute<{
      operation_id: string;
      raw_data_package_id: string;
    }>('select operation_id, raw_data_package_id from long_term_archive_operation');
    const pkgOf = new Map(
      byOperation.map((r) => [String(r.operation_id), String(r.raw_data_package_id)]),
    );
    return claimed.map((c) => ({
      id: c.id,
      attempt: c.attempt,
      outputs: [
        {
          artifactType: 'raw_data_package' as const,
          artifactId: pkgOf.get(c.id) as string,
          locationId: world.archive.id,
        },
      ],
    }));
  }

  it('completion: a batch of distinct outputs touches as many buffers per operation with 20,000 live copies at its location as with none', async () => {
    const buffers: number[] = [];
    const store = new OperationStore(
      measuringBuffers(database, 'insert into operation_output', buffers),
    );

    const first = await store.completeMany(await runningArchives(60));
    expect(first.every((r) => r.ok && r.copiesCreated === 1)).toBe(true);

    // 20,000 more live copies at the same archive location, each of its own package.
    await database.execute(sql`
      with p as (
        insert into raw_data_package (name)
        select 'stored-' || gen_random_uuid() from generate_series(1, 20000) returning id
      ),
      c as (
        insert into physical_copy (artifact_type, artifact_id, location_id)
        select 'raw_data_package', id, ${world.archive.id}::uuid from p returning id, artifact_id
      )
      insert into raw_data_package_physical_copy (physical_copy_id, raw_data_package_id)
      select id, artifact_id from c`);

    const second = await store.completeMany(await runningArchives(60));
    expect(second.every((r) => r.ok && r.copiesCreated === 1)).toBe(true);

    expect(buffers).toHaveLength(2);
    // Each output is looked up by its own key, once per batch: neither the other outputs of the
    // batch nor the copies already stored at the location are scanned per output. Measured: 29
    // and 40 buffers per operation; the lookup this replaced scanned the location's live copies
    // once per pair of outputs of the batch: 147 and 276.
    const perOperation = buffers.map((b) => b / 60);
    expect(perOperation[0]).toBeLessThan(60);
    expect(perOperation[1]).toBeLessThan(60);
  });

  // Runs after the completion test, which claims every PENDING operation: the one created here
  // stays PENDING.
  it('the circuit breakers’ and the inspection stream’s reads: a page of new transitions by key, however much history grew since the last ANALYZE', async () => {
    const id = await new OperationStore(database).create(inputFor(OperationKind.TRANSFER, world));
    const history = (n: number) =>
      database.execute(sql`
        insert into operation_transition (operation_id, from_status, to_status, event, attempt, by, at)
        select ${id}::uuid, 'PENDING', 'SCHEDULED', 'SCHEDULE', 1, 'history', now()
        from generate_series(1, ${n}::int)`);
    // Statistics taken while the history is small, then 200,000 transitions more, with
    // autovacuum held off so that the planner still sees the small table: a deployment between
    // two ANALYZEs after a burst.
    await database.execute('alter table operation_transition set (autovacuum_enabled = off)');
    await history(1_000);
    await database.execute('analyze operation_transition');
    await history(200_000);
    const [row] = await database.execute<{ id: number }>(
      'select max(id) - 2000 as id from operation_transition',
    );
    const after = Number(row?.id);

    const buffers: number[] = [];
    const measured = measuringBuffers(database, 'from operation_transition', buffers);
    const read = await new CircuitBreakerRepository(measured).readOutcomes(after, [], 1024);
    expect(read.ids).toHaveLength(1024);
    expect(read.ids[0]).toBe(after + 1);
    const streamed = await selectTransitionsAfter(measured, after, [], 1024);
    expect(streamed).toHaveLength(1024);
    expect(streamed[0]).toMatchObject({
      id: after + 1,
      operationId: id,
      kind: OperationKind.TRANSFER,
    });

    expect(buffers).toHaveLength(2);
    // The breakers' read is a range scan of the primary key: the pages those 1,024 rows live on
    // and a few index pages, measured 20. The stream's adds one lookup of each row's operation by
    // its key, two buffers a row: measured 2,068. The joins with the table they replaced hashed a
    // sequential scan of all 201,000 rows into every read: 4,116 and 8,212 here.
    expect(buffers[0]).toBeLessThan(100);
    expect(buffers[1]).toBeLessThan(4 * 1024);
  });
});
