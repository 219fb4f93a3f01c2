import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { measuringBuffers } from '../helpers/explainBuffers.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { makeWorld } from './fixtures.ts';

describe('the circuit breakers’ read of the history on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  it('reads a page of new transitions by key, however much history grew since the last ANALYZE', async () => {
    const world = await makeWorld(database);
    const id = await new OperationStore(database).create({
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: world.dtp,
        sourceLocationId: world.source.id,
        destinationLocationId: world.buffer.id,
      },
    });
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
    const breakers = new CircuitBreakerRepository(
      measuringBuffers(database, 'from operation_transition', buffers),
    );
    const read = await breakers.readOutcomes(after, [], 1024);

    expect(read.ids).toHaveLength(1024);
    expect(read.ids[0]).toBe(after + 1);
    expect(buffers).toHaveLength(1);
    // A range scan of the primary key touches the pages those 1,024 rows live on and a few index
    // pages: measured 20. The join with the table it replaced hashed a sequential scan of all
    // 201,000 rows into every read: 4,116 here.
    expect(buffers[0]).toBeLessThan(100);
  });
});
