import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { definePipeline } from '../../machines/pipeline.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionPolicyRepository } from '../../persistence/DeletionPolicyRepository.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { rollbackPipeline } from '../../persistence/rollbackPipeline.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { archivedPackage } from '../persistence/copyFixtures.ts';
import { makeWorld, type World } from '../persistence/fixtures.ts';

/**
 * A superseded archive vouches for no deletion, on the real Postgres: once a rollback redoes a
 * package's archive, the buffer copy that archive read (and the re-run reads again) is neither on
 * the deleters' list nor deletable, until the re-run's archive verifies it; a package no rollback
 * touched is deleted as before.
 */
let testDb: TestDatabase;
let database: Database;
let w: World;

beforeAll(async () => {
  testDb = await createTestDatabase(undefined, { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  w = await makeWorld(database);
});
afterAll(async () => {
  await database?.close();
  if (testDb !== undefined) await dropTestDatabase(testDb);
});

describe('a rollback and the deletion path', () => {
  it('keeps the buffer copy a superseded archive read: off the deleters’ list and refused, while the untouched package’s copy is deletable', async () => {
    const pipeline = definePipeline({
      name: 'archiving',
      locations: {
        buffer: { site: w.buffer.site, name: w.buffer.name },
        lta: { site: w.archive.site, name: w.archive.name },
      },
      stages: { archive: { kind: OperationKind.LONG_TERM_ARCHIVE, from: 'buffer', at: 'lta' } },
    });
    const locations = new Map([
      ['buffer', w.buffer.id],
      ['lta', w.archive.id],
    ]);
    const rolled = await archivedPackage(database, w, 'verified');
    const kept = await archivedPackage(database, w, 'verified');
    const policies = new DeletionPolicyRepository(database);
    await policies.set({ graceSeconds: 0 }, 'test');
    const deletions = new DeletionRepository(database);
    const listed = async () =>
      (await deletions.eligible(await policies.get(), 100)).map((c) => c.copyId);
    expect(await listed()).toEqual(expect.arrayContaining([rolled.buffer.id, kept.buffer.id]));

    await rollbackPipeline(
      database,
      pipeline,
      locations,
      { artifact: rolled.pkg, to: 'archive', by: 'operator:alice', dryRun: false },
      new Date(),
    );
    const after = await listed();
    expect(after).toContain(kept.buffer.id);
    expect(after).not.toContain(rolled.buffer.id);
    const copies = new CopyLifecycle(database);
    await expect(
      copies.apply(rolled.buffer.id, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-t' }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.UNSAFE });
    const scheduled = await copies.apply(
      kept.buffer.id,
      { type: 'SCHEDULE_DELETION' },
      { by: 'deleter-t' },
    );
    expect(scheduled.status).toBe('DELETION_SCHEDULED');
  });
});
