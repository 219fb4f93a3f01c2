import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import type { DeletionPlanInsert } from '../../persistence/DeletionPlan.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { GroupRepository } from '../../persistence/GroupRepository.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { archivedPackage, bufferPolicyWithoutGrace } from './copyFixtures.ts';
import { inputFor, makeWorld } from './fixtures.ts';
import type { SuiteBackend } from './storeSuite.ts';

async function refusal(promise: Promise<unknown>): Promise<OpstateError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  return err as OpstateError;
}

/** Everything a refused copy move could have touched, to prove it changed nothing. */
async function copyState(database: Database, copyId: string) {
  const [row] = await database.execute(`select status, version, deletion_failure_count,
    (select count(*) from physical_copy_transition where physical_copy_id = '${copyId}')::int as history,
    (select count(*) from copy_deletion where physical_copy_id = '${copyId}')::int as plans
    from physical_copy where id = '${copyId}'`);
  return row;
}

/** The deleters' work list for one archive operation, as `<copy id> <location type>`. */
async function candidatesOf(database: Database, archiveOperationId: string): Promise<string[]> {
  const rows = await database.execute(`select physical_copy_id, location_type
    from deletion_candidate where archive_operation_id = '${archiveOperationId}'
    order by physical_copy_id`);
  return rows.map((r) => `${String(r.physical_copy_id)} ${String(r.location_type)}`);
}

/** A one-member plan, as a deleter would write it (the store does not look at files). */
function planOf(
  copyId: string,
  archive: { operationId: string; copyId: string; digest: string },
): DeletionPlanInsert {
  return {
    deletionId: randomUUID(),
    archiveOperationId: archive.operationId,
    archiveCopyId: archive.copyId,
    archiveDigest: archive.digest,
    archiveObjectSha256: archive.digest.slice('sha256:'.length),
    path: `/data/buffer/${copyId}`,
    folder: false,
    rootPath: '/data/buffer',
    rootDevice: '1',
    rootInode: '2',
    holder: 'deleter-t',
    leaseMs: 60_000,
    members: [
      {
        seq: 1,
        name: 'p.tar',
        path: `/data/buffer/${copyId}`,
        device: '1',
        inode: '3',
        size: 10,
        mtimeNs: '4',
        sha256: 'x',
      },
    ],
    outcomes: [],
    detail: {},
  };
}

/**
 * The physical-copy store behaviour every backend must show: every status change through the
 * machine, refused moves that say why and change nothing, the history, and a retention claim that
 * can never win together with a deletion. Run against Postgres and PGlite.
 */
export function copySuite(backend: SuiteBackend): void {
  const db = () => backend.database();
  const owner = () => backend.owner?.() ?? db();

  it('refuses to schedule the deletion of the only copy, with UNSAFE and the reason, changing nothing', async () => {
    const w = await makeWorld(db());
    const only = await archivedPackage(db(), w, 'none');
    const before = await copyState(db(), only.buffer.id);
    const err = await refusal(
      new CopyLifecycle(db()).apply(
        only.buffer.id,
        { type: 'SCHEDULE_DELETION' },
        { by: 'operator' },
      ),
    );
    expect(err.code).toBe(OpstateErrorCode.UNSAFE);
    expect(err.message).toMatch(
      /no verified archive copy .*no live copy of it at a long-term-archive location/,
    );
    expect(await copyState(db(), only.buffer.id)).toEqual(before);
  });

  it('refuses a copy whose archive is unverified, failed its verification, or holds other bytes', async () => {
    const w = await makeWorld(db());
    const copies = new CopyLifecycle(db());
    const unverified = await archivedPackage(db(), w, 'unverified', owner());
    const other = await archivedPackage(db(), w, 'other-digest');
    const failed = await archivedPackage(db(), w, 'verified');
    await new ArchiveRecordRepository(db()).recordVerification({
      operationId: failed.operationId as string,
      state: ArchiveState.VERIFY_FAILED,
      by: 'operator',
      detail: { differences: ['whole-object sha256 differs'] },
    });
    for (const [p, why] of [
      [unverified, /never VERIFIED, or its last verification failed/],
      [failed, /never VERIFIED, or its last verification failed/],
      [other, /digest differs from this copy's/],
    ] as const) {
      const before = await copyState(db(), p.buffer.id);
      const err = await refusal(
        copies.apply(p.buffer.id, { type: 'SCHEDULE_DELETION' }, { by: 'operator' }),
      );
      expect(err.code).toBe(OpstateErrorCode.UNSAFE);
      expect(err.message).toMatch(why);
      expect(await copyState(db(), p.buffer.id)).toEqual(before);
    }
    // A failed verification bumped the copies relying on it: a decision made before it cannot land.
    expect((await copyState(db(), failed.buffer.id))?.version).toBe(1);
  });

  it('writes an independent verification again when concurrent writers clash, and says so after three clashes', async () => {
    const w = await makeWorld(db());
    const p = await archivedPackage(db(), w, 'verified');
    // The database as a deadlock with a deleter would leave it: the statement rolled back whole.
    const clashing = (times: number): Database => {
      let left = times;
      return new Proxy(db(), {
        get(target, key, receiver) {
          if (key !== 'execute') return Reflect.get(target, key, receiver);
          return (...args: Parameters<Database['execute']>) => {
            if (left-- > 0) {
              return Promise.reject(
                new OpstateError(
                  OpstateErrorCode.CONFLICT,
                  'concurrent writers clashed, try again: deadlock detected',
                  { retryable: true },
                ),
              );
            }
            return target.execute(...args);
          };
        },
      });
    };
    const failed = {
      operationId: p.operationId as string,
      state: ArchiveState.VERIFY_FAILED,
      by: 'operator',
      detail: { differences: ['whole-object sha256 differs'] },
    } as const;
    const entry = await new ArchiveRecordRepository(clashing(2)).recordVerification(failed);
    expect(entry.state).toBe(ArchiveState.VERIFY_FAILED);
    expect((await copyState(db(), p.buffer.id))?.version).toBe(1);
    const err = await refusal(new ArchiveRecordRepository(clashing(3)).recordVerification(failed));
    expect(err.code).toBe(OpstateErrorCode.CONFLICT);
    expect((await copyState(db(), p.buffer.id))?.version).toBe(1);
  });

  it('refuses a copy an active retention claim holds, and schedules it once the claim is released', async () => {
    const w = await makeWorld(db());
    const copies = new CopyLifecycle(db());
    const groups = new GroupRepository(db());
    const p = await archivedPackage(db(), w, 'verified');
    const group = await groups.create({ name: 'staging job', active: true });
    await new OperationStore(db()).create({
      kind: OperationKind.STAGING,
      groupId: group.id,
      fields: {
        rawDataPackageId: p.pkg,
        sourceLocationId: w.buffer.id,
        destinationLocationId: w.processing.id,
      },
      inputs: [p.buffer.id],
    });
    expect((await copyState(db(), p.buffer.id))?.version).toBe(1); // taking the claim bumped it
    const err = await refusal(
      copies.apply(p.buffer.id, { type: 'SCHEDULE_DELETION' }, { by: 'operator' }),
    );
    expect(err.code).toBe(OpstateErrorCode.UNSAFE);
    expect(err.message).toContain(`retention claim holds it (group ${group.id})`);
    expect(await groups.isCopyRetained(p.buffer.id)).toBe(true);
    await groups.setActive(group.id, false);
    const t = await copies.apply(
      p.buffer.id,
      { type: 'SCHEDULE_DELETION' },
      { by: 'operator', reason: 'claim released' },
    );
    expect(t).toMatchObject({ from: 'PRESENT', status: 'DELETION_SCHEDULED' });
    // A claim on a copy whose deletion was decided is refused by the database itself.
    const claim = await refusal(groups.setActive(group.id, true));
    expect(claim.code).toBe(OpstateErrorCode.CONFLICT);
    expect(claim.message).toMatch(/retention claim refused: copy .* is DELETION_SCHEDULED/);
    expect((await groups.get(group.id))?.active).toBe(false);
  });

  it('a scheduled copy is claimed by one deleter at a time: another does not plan it until the claim runs out or is released', async () => {
    const w = await makeWorld(db());
    const copies = new CopyLifecycle(db());
    const deletions = new DeletionRepository(db());
    const p = await archivedPackage(db(), w, 'verified');
    await copies.apply(p.buffer.id, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-a' });
    const mine = (rows: { id: string }[]) => rows.filter((r) => r.id === p.buffer.id);
    const before = await copyState(db(), p.buffer.id);
    // Both deleters look at once: the copy goes to one of them.
    const [a, b] = await Promise.all([
      deletions.scheduled(16, 60_000),
      deletions.scheduled(16, 60_000),
    ]);
    expect(mine(a).length + mine(b).length).toBe(1);
    expect(mine(await deletions.scheduled(16, 60_000))).toEqual([]);
    // The claim changes neither status nor version nor history.
    expect(await copyState(db(), p.buffer.id)).toEqual(before);
    // Released (the claimer cannot plan it), it is there for the next deleter; a claim of 0 ms
    // runs out at once.
    await deletions.releaseClaim(p.buffer.id);
    expect(mine(await deletions.scheduled(16, 0))).toHaveLength(1);
    expect(mine(await deletions.scheduled(16, 60_000))).toHaveLength(1);
    expect(mine(await deletions.scheduled(16, 60_000))).toEqual([]);
  });

  it('walks a copy to DELETED only with a plan and a receipt, recording every change; DELETED frees the slot', async () => {
    const w = await makeWorld(db());
    const copies = new CopyLifecycle(db());
    const deletions = new DeletionRepository(db());
    const p = await archivedPackage(db(), w, 'verified');
    const archive = {
      operationId: p.operationId as string,
      copyId: p.archiveCopy?.id as string,
      digest: p.digest,
    };
    await copies.apply(
      p.buffer.id,
      { type: 'SCHEDULE_DELETION' },
      { by: 'deleter-t', reason: 'eligible' },
    );
    const plan = planOf(p.buffer.id, archive);
    const started = await copies.apply(
      p.buffer.id,
      { type: 'START_DELETION' },
      { by: 'deleter-t', plan },
    );
    expect(started).toMatchObject({ status: 'DELETION_IN_PROGRESS', epoch: 1 });
    const early = await refusal(
      copies.apply(p.buffer.id, { type: 'DELETION_SUCCEEDED' }, { by: 'deleter-t' }),
    );
    expect(early.code).toBe(OpstateErrorCode.UNSAFE);
    expect(early.message).toMatch(/no durable receipt/);
    const step = { deletionId: plan.deletionId, epoch: 1, holder: 'deleter-t', leaseMs: 60_000 };
    // A deleter without the lease records nothing.
    expect(
      (
        await deletions.step({
          ...step,
          holder: 'intruder',
          previous: { seq: 1, outcome: 'DELETED', reason: null },
        })
      ).leaseHeld,
    ).toBe(false);
    const facts = await deletions.step({
      ...step,
      previous: { seq: 1, outcome: 'DELETED', reason: null },
      finish: true,
    });
    expect(facts).toMatchObject({
      leaseHeld: true,
      archiveOk: true,
      kept: 0,
      accounted: 1,
      members: 1,
    });
    const receipt = await deletions.receipt({ ...step, detail: {} });
    expect(receipt).toMatchObject({
      membersDeleted: 1,
      membersMissing: 0,
      bytes: 10,
      archiveDigest: p.digest,
    });
    expect(await deletions.receipt({ ...step, detail: {} })).toEqual(receipt); // written once
    expect(await candidatesOf(db(), archive.operationId)).toEqual([`${p.buffer.id} buffer`]);
    await copies.apply(p.buffer.id, { type: 'DELETION_SUCCEEDED' }, { by: 'deleter-t' });
    // DELETED is final: the copy leaves the deleters' work list with it.
    expect(await candidatesOf(db(), archive.operationId)).toEqual([]);
    expect(
      (await copies.history(p.buffer.id)).map((t) => `${t.from}→${t.to} v${t.version} ${t.by}`),
    ).toEqual([
      'PRESENT→DELETION_SCHEDULED v1 deleter-t',
      'DELETION_SCHEDULED→DELETION_IN_PROGRESS v2 deleter-t',
      'DELETION_IN_PROGRESS→DELETED v3 deleter-t',
    ]);
    expect(
      (await new ArchiveRecordRepository(db()).list(archive.operationId))
        .map((r) => r.state)
        .slice(-3),
    ).toEqual(['SOURCE_REVALIDATED', 'DELETED', 'RECEIPTED']);
    // History is append-only (even to the schema's owner), and a DELETED copy frees the live slot for a new copy.
    expect(
      (
        await refusal(
          owner().execute(
            `update physical_copy_transition set by = 'x' where physical_copy_id = '${p.buffer.id}'`,
          ),
        )
      ).message,
    ).toMatch(/append-only/);
    const again = await w.artifacts.addCopy({
      artifactType: 'raw_data_package',
      artifactId: p.pkg,
      locationId: w.buffer.id,
    });
    expect(again.created).toBe(true);
  });

  it('the deleters look for work only in their list: a VERIFIED archive enlists the copies it consumed, nothing else does', async () => {
    const w = await makeWorld(db());
    const records = new ArchiveRecordRepository(db());
    const deletions = new DeletionRepository(db());
    const policy = bufferPolicyWithoutGrace();
    const eligibleIds = async () =>
      new Set((await deletions.eligible(policy, 10_000)).map((c) => c.copyId));

    // Completed, uploaded, never verified: not on the list, so never a candidate.
    const p = await archivedPackage(db(), w, 'unverified', owner());
    const operationId = p.operationId as string;
    expect(await candidatesOf(db(), operationId)).toEqual([]);
    expect((await eligibleIds()).has(p.buffer.id)).toBe(false);

    // An operator's independent verification enlists the copy, once however often it is repeated.
    for (let n = 0; n < 2; n++) {
      await records.recordVerification({
        operationId,
        state: ArchiveState.VERIFIED,
        by: 'operator',
      });
    }
    expect(await candidatesOf(db(), operationId)).toEqual([`${p.buffer.id} buffer`]);
    expect((await eligibleIds()).has(p.buffer.id)).toBe(true);

    // The list only says where to look; the facts still decide. A failed re-verification keeps
    // the copy listed (a later VERIFIED may clear the archive again) but not eligible.
    await records.recordVerification({
      operationId,
      state: ArchiveState.VERIFY_FAILED,
      by: 'operator',
      detail: { differences: ['whole-object sha256 differs'] },
    });
    expect(await candidatesOf(db(), operationId)).toEqual([`${p.buffer.id} buffer`]);
    expect((await eligibleIds()).has(p.buffer.id)).toBe(false);
    await records.recordVerification({ operationId, state: ArchiveState.VERIFIED, by: 'operator' });
    expect((await eligibleIds()).has(p.buffer.id)).toBe(true);

    // A copy off the list is not looked at, whatever its facts.
    await db().execute(`delete from deletion_candidate where physical_copy_id = '${p.buffer.id}'`);
    expect((await eligibleIds()).has(p.buffer.id)).toBe(false);

    // A VERIFIED row on an operation that is not a long-term archive enlists nothing.
    const store = new OperationStore(db());
    const transfer = await store.create({
      ...inputFor(OperationKind.TRANSFER, w),
      inputs: [w.sourceCopy],
    });
    await records.recordVerification({
      operationId: transfer,
      state: ArchiveState.VERIFIED,
      by: 'operator',
    });
    expect(await candidatesOf(db(), transfer)).toEqual([]);
  });

  it('a retention claim taken while a deletion is being scheduled never lets both win (many rounds)', async () => {
    const w = await makeWorld(db());
    const peer = await backend.peer();
    const wins = { claim: 0, deletion: 0 };
    try {
      for (let round = 0; round < 25; round++) {
        const p = await archivedPackage(db(), w, 'verified');
        const group = await new GroupRepository(db()).create({ name: `job ${round}` });
        await new OperationStore(db()).create({
          kind: OperationKind.STAGING,
          groupId: group.id,
          fields: {
            rawDataPackageId: p.pkg,
            sourceLocationId: w.buffer.id,
            destinationLocationId: w.processing.id,
          },
          inputs: [p.buffer.id],
        });
        const [claim, deletion] = await Promise.allSettled([
          new GroupRepository(peer).setActive(group.id, true),
          new CopyLifecycle(db()).apply(
            p.buffer.id,
            { type: 'SCHEDULE_DELETION' },
            { by: 'deleter-t' },
          ),
        ]);
        const active = (await new GroupRepository(db()).get(group.id))?.active === true;
        const status = (await copyState(db(), p.buffer.id))?.status;
        expect([active, status], `round ${round}`).not.toEqual([true, 'DELETION_SCHEDULED']);
        expect(
          [claim.status, deletion.status].filter((s) => s === 'fulfilled'),
          `round ${round}`,
        ).toHaveLength(1);
        if (claim.status === 'fulfilled') {
          wins.claim++;
          expect(status).toBe('PRESENT');
          expect((deletion as PromiseRejectedResult).reason).toMatchObject({
            code: OpstateErrorCode.UNSAFE,
          });
        } else {
          wins.deletion++;
          expect(active).toBe(false);
          expect((claim as PromiseRejectedResult).reason).toMatchObject({
            code: OpstateErrorCode.CONFLICT,
          });
        }
      }
    } finally {
      if (peer !== db()) await peer.close();
    }
    expect(wins.claim + wins.deletion).toBe(25);
  });
}
