import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { GroupRepository } from '../../persistence/GroupRepository.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createRuntime } from '../../runtime/Runtime.ts';
import { releaseClaim, stageFor } from '../../runtime/stagingOnRequest.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { type ArchivedPackage, archivedPackage } from '../persistence/copyFixtures.ts';
import { makeWorld, tableCounts, type World } from '../persistence/fixtures.ts';

/**
 * Staging on request on the real Postgres: one transaction creates the active group and its
 * STAGING operation, whose input is the verified archive copy staged from; the deletion path
 * refuses that copy while the group is active and takes it once the group is released.
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

const stage = (request: { package: string; to: string }, by = 'operator:alice') =>
  stageFor({ database, clock: systemClock, wake: () => undefined }, request, by);

async function refusal(promise: Promise<unknown>): Promise<OpstateError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  return err as OpstateError;
}

/** Everything a staging writes or a release changes, to prove a refusal changed nothing. */
async function everything(): Promise<Record<string, unknown>> {
  const [groups] = await database.execute(`select count(*)::int as groups,
    count(*) filter (where active)::int as active,
    string_agg(coalesce(released_by, '-'), ',' order by id) as released_by,
    (select coalesce(sum(version), 0) from physical_copy)::int as copy_versions
    from operation_group`);
  return { ...(await tableCounts(database)), ...groups };
}

/**
 * A second verified archive of the package, at another long-term-archive location: so the first
 * archive copy is itself a copy the deletion path could take (another verified archive holds the
 * same bytes), and only the claim keeps it.
 */
async function archiveAgain(p: ArchivedPackage, site: string) {
  const lta2 = await w.artifacts.addLocation({
    site,
    name: 'lta-2',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: '/lta2',
  });
  const store = new OperationStore(database);
  const records = new ArchiveRecordRepository(database);
  const operationId = await store.create({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: p.pkg,
      sourceLocationId: w.buffer.id,
      destinationLocationId: lta2.id,
    },
    inputs: [p.buffer.id],
  });
  await store.apply(operationId, { type: 'SCHEDULE' });
  await store.apply(operationId, { type: 'START', attempt: 1, workerId: 'w' });
  const content = p.digest.slice('sha256:'.length);
  const identity = {
    operationId,
    attempt: 1,
    by: 'w',
    archiveKey: `${p.pkg}.tar`,
    objectVersion: '1:2:3',
    objectSha256: content,
    contentSha256: content,
    size: 10,
  };
  await records.append({
    ...identity,
    state: ArchiveState.PLANNED,
    manifest: { members: [], package: [] },
  });
  for (const state of [ArchiveState.UPLOADED, ArchiveState.READ_BACK, ArchiveState.VERIFIED]) {
    await records.append({ ...identity, state });
  }
  await store.complete(operationId, 1, [
    {
      artifactType: 'raw_data_package',
      artifactId: p.pkg,
      locationId: lta2.id,
      path: `/lta2/${p.pkg}.tar`,
      checksum: p.digest,
      size: 10,
    },
  ]);
}

describe('opstate stage: a staging group whose retention claim the deletion path honours', () => {
  it('holds the archive copy it stages from: its deletion is refused until the group is released', async () => {
    const p = await archivedPackage(database, w, 'verified');
    await archiveAgain(p, `other-${p.pkg.slice(0, 8)}`);
    const claimed = p.archiveCopy?.id as string;
    const copies = new CopyLifecycle(database);
    // Before the staging, the deletion path would take the first archive copy (the second
    // archive is a verified archive of the same bytes): the claim is what keeps it.
    expect((await copies.facts(claimed)).facts).toMatchObject({
      verifiedArchive: true,
      retainedBy: [],
    });

    const s = await stage({ package: p.pkg, to: `${w.processing.site}/${w.processing.name}` });
    expect(s.from).toEqual({
      copyId: claimed,
      locationId: w.archive.id,
      location: `${w.archive.site}/${w.archive.name}`,
    });
    expect(s.to).toEqual({
      locationId: w.processing.id,
      location: `${w.processing.site}/${w.processing.name}`,
    });
    const before = await everything();
    const refused = await refusal(
      copies.apply(claimed, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-t' }),
    );
    expect(refused.code).toBe(OpstateErrorCode.UNSAFE);
    expect(refused.message).toContain(`an active retention claim holds it (group ${s.groupId})`);
    expect(await everything()).toEqual(before);
    // The claim is on what the staging reads, not on every copy of the package.
    expect((await copies.facts(p.buffer.id)).facts.retainedBy).toEqual([]);

    const released = await releaseClaim(database, s.groupId, 'operator:bob (test)');
    expect(released).toMatchObject({ groupId: s.groupId, releasedBy: 'operator:bob (test)' });
    expect(await new GroupRepository(database).get(s.groupId)).toMatchObject({
      active: false,
      createdBy: 'operator:alice',
      releasedBy: 'operator:bob (test)',
    });
    const t = await copies.apply(claimed, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-t' });
    expect(t).toMatchObject({ from: 'PRESENT', status: 'DELETION_SCHEDULED' });
  });

  it('creates the group and its STAGING operation PENDING, reading the archive copy into the processing location', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const before = await everything();
    const s = await stage({ package: p.pkg, to: w.processing.id });
    const op = await inspectOperation(database, s.operationId);
    expect(op).toMatchObject({
      kind: OperationKind.STAGING,
      status: 'PENDING',
      groupId: s.groupId,
      fields: {
        rawDataPackageId: p.pkg,
        sourceLocationId: w.archive.id,
        destinationLocationId: w.processing.id,
      },
    });
    expect(op.inputs.map((c) => c.id)).toEqual([p.archiveCopy?.id]);
    expect(op.transitions[0]?.by).toBe('operator:alice');
    expect(await new GroupRepository(database).get(s.groupId)).toMatchObject({
      active: true,
      releasedAt: null,
      createdBy: 'operator:alice',
    });
    expect(await new GroupRepository(database).isCopyRetained(p.archiveCopy?.id as string)).toBe(
      true,
    );
    const after = await everything();
    expect(after.operation).toBe((before.operation as number) + 1);
    expect(after.inputs).toBe((before.inputs as number) + 1);
    expect(after.groups).toBe((before.groups as number) + 1);
    expect(after.active).toBe((before.active as number) + 1);
  });

  it('never reads an archive a rollback redoes: refused while it is the only one, another verified archive read instead', async () => {
    const p = await archivedPackage(database, w, 'verified');
    // What a rollback to the archive stage writes in its transaction: its record, and the archive
    // operation marked as redone by it (its re-run not yet complete).
    const rollbackId = randomUUID();
    await database.execute(`insert into pipeline_rollback
        (id, pipeline, artifact_type, artifact_id, stage, requested_by, plan)
      values ('${rollbackId}', 'preservation', 'raw_data_package', '${p.pkg}', 'archive',
        'operator:alice', '{}')`);
    await database.execute(
      `update operation set superseded_by = '${rollbackId}' where id = '${p.operationId}'`,
    );
    const before = await everything();
    const err = await refusal(stage({ package: p.pkg, to: w.processing.id }));
    expect(err.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(err.message).toMatch(/has no verified archive copy to stage from/);
    expect(err.message).toMatch(/not redone by a rollback/);
    expect(await everything()).toEqual(before);
    // A second verified archive, at another location, is the one read.
    await archiveAgain(p, `rb-${p.pkg.slice(0, 8)}`);
    const s = await stage({ package: p.pkg, to: w.processing.id });
    const op = await inspectOperation(database, s.operationId);
    expect(op.inputs.map((c) => c.id)).not.toContain(p.archiveCopy?.id);
    expect(op.fields).toMatchObject({ sourceLocationId: expect.not.stringMatching(w.archive.id) });
  });

  it('holds the staged copy too once the staging completes, until the release', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const s = await stage({ package: p.pkg, to: w.processing.id });
    const store = new OperationStore(database);
    await store.apply(s.operationId, { type: 'SCHEDULE' });
    await store.apply(s.operationId, { type: 'START', attempt: 1, workerId: 'w' });
    await store.complete(s.operationId, 1, [
      {
        artifactType: 'raw_data_package',
        artifactId: p.pkg,
        locationId: w.processing.id,
        path: `/data/processing/${p.pkg}`,
        checksum: p.digest,
        size: 10,
      },
    ]);
    const staged = await w.artifacts.findLiveCopy('raw_data_package', p.pkg, w.processing.id);
    const copies = new CopyLifecycle(database);
    const held = async () => ({
      archive: (await copies.facts(p.archiveCopy?.id as string)).facts.retainedBy,
      staged: (await copies.facts(staged?.id as string)).facts.retainedBy,
    });
    expect(await held()).toEqual({ archive: [s.groupId], staged: [s.groupId] });
    // The staged copy has a verified archive, so only the claim keeps it from the deletion path.
    const refused = await refusal(
      copies.apply(staged?.id as string, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-t' }),
    );
    expect(refused.message).toContain(`an active retention claim holds it (group ${s.groupId})`);
    await releaseClaim(database, s.groupId, 'operator:bob (test)');
    expect(await held()).toEqual({ archive: [], staged: [] });
    const t = await copies.apply(
      staged?.id as string,
      { type: 'SCHEDULE_DELETION' },
      { by: 'deleter-t' },
    );
    expect(t.status).toBe('DELETION_SCHEDULED');
  });

  it('a staging racing the deletion of the archive copy it would read never holds a copy being deleted', async () => {
    const peer = await openDatabase({ databaseUrl: testDb.url, max: 4 });
    try {
      for (let round = 0; round < 10; round++) {
        const p = await archivedPackage(database, w, 'verified');
        await archiveAgain(p, `race-${round}-${p.pkg.slice(0, 8)}`);
        const first = p.archiveCopy?.id as string;
        const [staged, deletion] = await Promise.all([
          stage({ package: p.pkg, to: w.processing.id }),
          new CopyLifecycle(peer)
            .apply(first, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-t' })
            .then(
              () => undefined,
              (e: unknown) => e,
            ),
        ]);
        const input = (await inspectOperation(database, staged.operationId)).inputs[0]?.id;
        const status = (await new CopyLifecycle(database).facts(first)).state.status;
        if (deletion === undefined) {
          // The deletion landed first: the staging read the other archive copy.
          expect(status).toBe('DELETION_SCHEDULED');
          expect(input).not.toBe(first);
        } else {
          // The claim landed first: the deletion decided again and saw it.
          expect((deletion as OpstateError).code).toBe(OpstateErrorCode.UNSAFE);
          expect((deletion as OpstateError).message).toContain(
            `retention claim holds it (group ${staged.groupId})`,
          );
          expect(status).toBe('PRESENT');
          expect(input).toBe(first);
        }
      }
    } finally {
      await peer.close();
    }
  });

  it('runtime.stage and runtime.release: recorded as the service by default, scheduled by its control plane', async () => {
    // Archived by hand before a control plane runs (it would schedule the archive under the fixture).
    const p = await archivedPackage(database, w, 'verified');
    const runtime = await createRuntime({ databaseUrl: testDb.url, serviceName: 'reduction' });
    try {
      runtime.startControlPlane();
      const s = await runtime.stage({ package: p.pkg, to: w.processing.id });
      await waitFor(
        async () => (await runtime.get(s.operationId)).status === 'SCHEDULED',
        'the staging to be scheduled',
        30_000,
      );
      expect((await runtime.get(s.operationId)).transitions[0]?.by).toBe('reduction');
      const released = await runtime.release(s.groupId);
      expect(released.releasedBy).toBe('reduction');
      const again = await refusal(runtime.release(s.groupId, { by: 'alice' }));
      expect(again.code).toBe(OpstateErrorCode.BAD_INPUT);
      expect(await new GroupRepository(database).get(s.groupId)).toMatchObject({
        active: false,
        createdBy: 'reduction',
        releasedBy: 'reduction',
      });
    } finally {
      await runtime.close();
    }
  });

  it('refuses bad input with a clear error and creates nothing', async () => {
    const none = await archivedPackage(database, w, 'none');
    const unverified = await archivedPackage(database, w, 'unverified');
    const good = await archivedPackage(database, w, 'verified');
    const failed = await archivedPackage(database, w, 'verified');
    await new ArchiveRecordRepository(database).recordVerification({
      operationId: failed.operationId as string,
      state: ArchiveState.VERIFY_FAILED,
      by: 'operator',
      // The content still reads back as archived; the stored object does not: not VERIFIED.
      contentSha256: failed.digest.slice('sha256:'.length),
      objectSha256: '0'.repeat(64),
      detail: { differences: ['whole-object sha256 differs'] },
    });
    const processing = `${w.processing.site}/${w.processing.name}`;
    const cases: [string, { package: string; to: string }, OpstateErrorCode, RegExp][] = [
      [
        'an unknown package',
        { package: '0190a8f4-0000-7000-8000-000000000000', to: processing },
        OpstateErrorCode.NOT_FOUND,
        /no raw data package 0190a8f4-0000-7000-8000-000000000000/,
      ],
      [
        'a package id that is no uuid',
        { package: 'rdp-1', to: processing },
        OpstateErrorCode.BAD_INPUT,
        /must be a raw data package's id \(a uuid/,
      ],
      [
        'a package with no archive',
        { package: none.pkg, to: processing },
        OpstateErrorCode.BAD_INPUT,
        /has no verified archive copy to stage from/,
      ],
      [
        'a package whose archive was never verified',
        { package: unverified.pkg, to: processing },
        OpstateErrorCode.BAD_INPUT,
        /has no verified archive copy to stage from/,
      ],
      [
        'a package whose archive failed its last verification',
        { package: failed.pkg, to: processing },
        OpstateErrorCode.BAD_INPUT,
        /has no verified archive copy to stage from/,
      ],
      [
        'a buffer as the destination',
        { package: good.pkg, to: w.buffer.id },
        OpstateErrorCode.BAD_INPUT,
        /is a buffer location; a staging writes into a processing location/,
      ],
      [
        'a long-term archive as the destination',
        { package: good.pkg, to: `${w.archive.site}/${w.archive.name}` },
        OpstateErrorCode.BAD_INPUT,
        /is a long_term_archive location; a staging writes into a processing location/,
      ],
      [
        'an unknown location',
        { package: good.pkg, to: `${w.processing.site}/nowhere` },
        OpstateErrorCode.NOT_FOUND,
        /unknown location '.*\/nowhere'/,
      ],
      [
        'no location',
        { package: good.pkg, to: '' },
        OpstateErrorCode.BAD_INPUT,
        /a staging needs a processing location/,
      ],
    ];
    for (const [what, request, code, message] of cases) {
      const before = await everything();
      const err = await refusal(stage(request));
      expect(err.code, what).toBe(code);
      expect(err.message, what).toMatch(message);
      expect(await everything(), what).toEqual(before);
    }
    // Who asked is a submitter name, as for every creation.
    const before = await everything();
    const who = await refusal(stage({ package: good.pkg, to: processing }, 'my service'));
    expect(who.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(who.message).toMatch(/by must be 1 to 64 characters/);
    expect(await everything()).toEqual(before);
  });

  it('refuses to release an unknown group or one already released, changing nothing', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const s = await stage({ package: p.pkg, to: w.processing.id });
    await releaseClaim(database, s.groupId, 'operator:bob (test)');
    const before = await everything();
    const again = await refusal(releaseClaim(database, s.groupId, 'operator:carol (test)'));
    expect(again.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(again.message).toMatch(
      new RegExp(
        `operation group ${s.groupId} holds no retention claim to release \\(it was released at .* by operator:bob \\(test\\)\\); nothing changed`,
      ),
    );
    const unknown = await refusal(
      releaseClaim(database, '0190a8f4-0000-7000-8000-000000000001', 'operator:bob (test)'),
    );
    expect(unknown.code).toBe(OpstateErrorCode.NOT_FOUND);
    expect(unknown.message).toContain('no operation group 0190a8f4-0000-7000-8000-000000000001');
    const notId = await refusal(releaseClaim(database, 'group-1', 'operator:bob (test)'));
    expect(notId.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(await everything()).toEqual(before);
  });
});
