import { getTableColumns } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { GroupRepository, type OperationGroupRecord } from '../../persistence/GroupRepository.ts';
import { type Lease, LeaseRepository } from '../../persistence/LeaseRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { controlPlaneLease } from '../../persistence/schema/controlPlaneLease.ts';
import { operationGroup } from '../../persistence/schema/operation.ts';

// The row types a repository hands out stay written by hand where they are published (the
// package's declarations do not name drizzle's types), but those that mirror a table exactly are
// held to it here: `npm run typecheck` fails when a column is added, renamed or retyped and the
// record is not, and the runtime half checks that the repository returns every column, no more.

describe('published row types that mirror a table', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://', engine: 'pglite' });
    await migrate(database);
  });
  afterAll(async () => {
    await database?.close();
  });

  it('an operation group is the operation_group row', async () => {
    expectTypeOf<OperationGroupRecord>().toEqualTypeOf<
      Readonly<typeof operationGroup.$inferSelect>
    >();
    const group = await new GroupRepository(database).create({ name: 'staging-1' });
    expect(Object.keys(group).sort()).toEqual(Object.keys(getTableColumns(operationGroup)).sort());
  });

  it('a lease is the control_plane_lease row and whether it has lapsed', async () => {
    expectTypeOf<Omit<Lease, 'expired'>>().toEqualTypeOf<
      Readonly<typeof controlPlaneLease.$inferSelect>
    >();
    const lease = await new LeaseRepository(database).acquire('row-types', 'a', 60_000);
    expect(Object.keys(lease ?? {}).sort()).toEqual(
      [...Object.keys(getTableColumns(controlPlaneLease)), 'expired'].sort(),
    );
  });
});
