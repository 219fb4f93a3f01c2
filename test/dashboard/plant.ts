import { randomUUID } from 'node:crypto';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { systemClock } from '../../machines/Clock.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { DEFAULT_LOCATION_TYPE, LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { JournalRepository } from '../../persistence/JournalRepository.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { timeOrderedId } from '../../persistence/timeOrderedId.ts';
import { createInProcessTransport } from '../../transport/inprocess/createInProcessTransport.ts';
import { archivedPackage } from '../persistence/copyFixtures.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
import { verifiedArchiveOutput } from '../persistence/verifiedArchive.ts';

const MIN = 60_000;

/** A reason written by someone hostile: the pages must show it as text. */
export const HOSTILE_REASON = 'duplicate <img src=x onerror="document.title=1"><b>request</b>';

/** Why the deleter kept a member of the planted deletion. */
export const KEPT_REASON = 'open by another process (pid 4242): kept, never deleted while in use';

/** A journal step's result: 5 KB without a space, which must wrap inside its card. */
export const LONG_RESULT = `sha256:${'0123456789abcdef'.repeat(320)}`;

/** The timers the planted cases are judged against (the runtime's defaults). */
export const PLANT_TIMING = {
  heartbeatTimeoutMs: 5 * MIN,
  reconcilerFloorMs: 60 * MIN,
  deadlines: DEFAULT_DEADLINES_MS,
};

/**
 * Operations in every state, and exactly these attention cases (by category, subject id): stuck
 * PENDING, stuck SCHEDULED (held by no worker), a SCHEDULED dispatch and an IN_PROGRESS operation
 * held by workers whose heartbeats went stale, IN_PROGRESS held by no worker past the floor; one at the retry cap; one FAILED (a cancelled one is not listed); two running on a
 * beating worker, one near its deadline and one past it; one OPEN breaker
 * (parking one old PENDING operation, which is therefore not listed as stuck); an archive that
 * found another object at its key (listed as a conflict and as failed); a source deletion blocked
 * by a kept member; a deletion whose deleter's lease lapsed ten minutes ago; the transfer and the
 * unpack queues, whose dispatches wait with no live worker serving them. Healthy ones (fresh,
 * beating for hours, completed, a deletion in progress under a live lease, a finished deletion
 * with its receipt, two packaging operations and the bundling of their packages) are not listed.
 *
 * Heartbeats: worker-c, live, reads the packaging queue and runs `beating`; worker-g, live and
 * idle, reads the transfer queue and holds nothing (so that queue is served, though its dispatches
 * wait: they are stuck, not unserved); worker-d and worker-f went stale, with heartbeats of an
 * older worker that do not say which queues they read. The bundling queue has a dispatch
 * scheduled just now and no live reader: it is listed at once.
 */
export async function plantEveryState(database: Database) {
  let now = Date.now();
  const at = (msAgo: number) => {
    now = Date.now() - msAgo;
  };
  const store = new OperationStore(database, { clock: { ...systemClock, now: () => now } });
  const w = await makeWorld(database);
  const hbClock = { ...systemClock, now: () => now };
  const transport = createInProcessTransport({
    clock: hbClock,
    timing: {
      heartbeatIntervalMs: MIN,
      heartbeatTimeoutMs: PLANT_TIMING.heartbeatTimeoutMs,
      reconcilerFloorMs: PLANT_TIMING.reconcilerFloorMs,
      ackWaitMs: 70 * MIN,
    },
  });
  const create = (kind: OperationKind, by = 'plant') => store.create({ ...inputFor(kind, w), by });
  const startOf = async (id: string, attempt: number, workerId: string) => {
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt, workerId });
  };

  at(0);
  const pendingFresh = await create(OperationKind.TRANSFER);
  const scheduledFresh = await create(OperationKind.UNPACK);
  await store.apply(scheduledFresh, { type: 'SCHEDULE' });

  // Completed, with lineage: archive consumes the source copy and produces the archive copy,
  // which a staging operation consumes.
  const completed = await create(OperationKind.LONG_TERM_ARCHIVE);
  await startOf(completed, 1, 'worker-a');
  // Archived through the archive protocol: a long-term archive completes with its VERIFIED record.
  await store.complete(completed, 1, [await verifiedArchiveOutput(database, completed)]);
  const [output] = await database.execute(
    `select physical_copy_id from operation_output where operation_id = '${completed}'`,
  );
  const archiveCopy = String(output?.physical_copy_id);
  const staging = await store.create({
    ...inputFor(OperationKind.STAGING, w),
    inputs: [archiveCopy],
  });

  // Lineage in two branches: two packages, each packaged from its own files (four and five) by
  // an operation of its own, both consumed by one bundling operation (left PENDING).
  const journal = new JournalRepository(database);
  const packaged = async (label: string, files: number) => {
    const name = `rdp-lineage-${label}-${randomUUID()}`;
    const pkg = await w.artifacts.addRawDataPackage({ name });
    const fileNames = Array.from({ length: files }, (_, n) => `${label}-frame-${n + 1}.fits`);
    const fileCopies: string[] = [];
    for (const name of fileNames) {
      const file = await w.artifacts.addRawDataFile({ name, rawDataPackageId: pkg });
      const { copy } = await w.artifacts.addCopy({
        artifactType: 'raw_data_file',
        artifactId: file,
        locationId: w.source.id,
      });
      fileCopies.push(copy.id);
    }
    const op = await store.create({
      kind: OperationKind.RAW_DATA_PACKAGE,
      fields: { rawDataPackageId: pkg, locationId: w.source.id },
      inputs: fileCopies,
      by: 'plant',
    });
    await startOf(op, 1, 'worker-a');
    if (label === 'a') {
      await journal.recordStep({
        operationId: op,
        attempt: 1,
        name: 'manifest',
        state: 'done',
        result: LONG_RESULT,
      });
    }
    await store.complete(op, 1, [
      { artifactType: 'raw_data_package', artifactId: pkg, locationId: w.source.id },
    ]);
    const copy = await w.artifacts.findLiveCopy('raw_data_package', pkg, w.source.id);
    return { pkg, name, op, copy: copy?.id as string, files: fileNames };
  };
  const packageA = await packaged('a', 4);
  const packageB = await packaged('b', 5);
  const bundling = await store.create({
    kind: OperationKind.DATA_TRANSFER_PACKAGE,
    fields: { dataTransferPackageId: w.dtp, locationId: w.source.id },
    inputs: [packageA.copy, packageB.copy],
    by: 'plant',
  });

  const failed = await create(OperationKind.UNPACK);
  await startOf(failed, 1, 'worker-b');
  await store.apply(failed, {
    type: 'FAIL',
    attempt: 1,
    error: { message: 'checksum mismatch in member 3', retryable: false },
  });
  const cancelled = await create(OperationKind.UNPACK);
  await store.apply(cancelled, { type: 'CANCEL', reason: HOSTILE_REASON });

  // Reset three times (monitor, reconciler, operator): PENDING at attempt 4, its budget spent.
  const retryCap = await create(OperationKind.DATA_TRANSFER_PACKAGE);
  await startOf(retryCap, 1, 'worker-a');
  await store.apply(retryCap, {
    type: 'RESET',
    by: 'heartbeat_monitor',
    reason: 'stale heartbeat: last heartbeat 400 s ago (timeout 300 s)',
    attempt: 1,
  });
  await startOf(retryCap, 2, 'worker-b');
  await store.apply(retryCap, {
    type: 'RESET',
    by: 'reconciler',
    reason: 'IN_PROGRESS for 3700 s with no live or registered task',
    attempt: 2,
  });
  await store.apply(retryCap, { type: 'SCHEDULE' });
  await store.apply(
    retryCap,
    { type: 'RESET', by: 'operator', reason: 'worker host replaced' },
    { by: 'operator' },
  );

  // Stuck: PENDING and SCHEDULED for two hours, IN_PROGRESS with no heartbeat for two hours.
  at(120 * MIN);
  const stuckPending = await create(OperationKind.TRANSFER);
  const stuckScheduled = await create(OperationKind.TRANSFER);
  await store.apply(stuckScheduled, { type: 'SCHEDULE' });
  const stuckNoBeat = await create(OperationKind.RAW_DATA_PACKAGE);
  await startOf(stuckNoBeat, 1, 'worker-gone');
  // Healthy for two hours: its worker beats.
  const beating = await create(OperationKind.RAW_DATA_PACKAGE);
  await startOf(beating, 1, 'worker-c');
  // An OPEN breaker on (long_term_archive, archive) parks this old PENDING one.
  const parked = await create(OperationKind.LONG_TERM_ARCHIVE);

  // On the beating worker-c with deadlines of their own: 50 of 60 minutes run (83 %), and 30
  // minutes run of 20 (the deadline path should have reset it).
  at(50 * MIN);
  const nearDeadline = await store.create({
    ...inputFor(OperationKind.RAW_DATA_PACKAGE, w),
    deadlineMs: 60 * MIN,
    by: 'plant',
  });
  await startOf(nearDeadline, 1, 'worker-c');
  at(30 * MIN);
  const pastDeadline = await store.create({
    ...inputFor(OperationKind.RAW_DATA_PACKAGE, w),
    deadlineMs: 20 * MIN,
    by: 'plant',
  });
  await startOf(pastDeadline, 1, 'worker-c');

  // IN_PROGRESS for ten minutes on worker-d, and a dispatch SCHEDULED ten minutes ago that
  // worker-f pulled: both workers' last heartbeats are six minutes old (the monitor's case).
  at(10 * MIN);
  const stuckStale = await create(OperationKind.RAW_DATA_PACKAGE);
  await startOf(stuckStale, 1, 'worker-d');
  const stuckHeld = await create(OperationKind.UNPACK);
  await store.apply(stuckHeld, { type: 'SCHEDULE' });
  at(6 * MIN);
  const held = (operationId: string, kind: OperationKind) => [{ kind, operationId, attempt: 1 }];
  await transport.heartbeats.beat('worker-d', held(stuckStale, OperationKind.RAW_DATA_PACKAGE));
  await transport.heartbeats.beat('worker-f', held(stuckHeld, OperationKind.UNPACK));
  at(0);
  await transport.heartbeats.beat(
    'worker-c',
    [beating, nearDeadline, pastDeadline].flatMap((id) => held(id, OperationKind.RAW_DATA_PACKAGE)),
    'c',
    { queues: ['source_raw_data_package_creation'], kinds: [OperationKind.RAW_DATA_PACKAGE] },
  );
  await transport.heartbeats.beat('worker-g', [], 'g', {
    queues: ['source_data_transfer'],
    kinds: [OperationKind.TRANSFER],
  });
  // Dispatched just now to a queue no live worker reads.
  const unreadFresh = await create(OperationKind.DATA_TRANSFER_PACKAGE);
  await store.apply(unreadFresh, { type: 'SCHEDULE' });

  const breakers = new CircuitBreakerRepository(database);
  await breakers.write([
    {
      kind: OperationKind.LONG_TERM_ARCHIVE,
      locationId: w.archive.id,
      expectedVersion: null,
      state: 'OPEN',
      consecutiveFailures: 5,
      openedAt: new Date(Date.now() - 3 * MIN),
      lastFailure: {
        message: 'archive endpoint refused the connection',
        retryable: true,
        operationId: failed,
        attempt: 1,
        at: new Date().toISOString(),
      },
      updatedAt: new Date(),
    },
  ]);

  // A source deletion that kept a member (open by another process): the copy stays, the reason
  // is recorded, and the copy is DELETION_FAILED for an operator.
  const blocked = await archivedPackage(database, w, 'verified');
  const copies = new CopyLifecycle(database);
  const deletions = new DeletionRepository(database);
  await copies.apply(
    blocked.buffer.id,
    { type: 'SCHEDULE_DELETION' },
    { by: 'deleter-p', reason: 'eligible' },
  );
  const deletionId = timeOrderedId(Date.now());
  const member = (seq: number, name: string) => ({
    seq,
    name,
    path: `/data/buffer/${blocked.pkg}/${name}`,
    device: '1',
    inode: String(10 + seq),
    size: 10,
    mtimeNs: '4',
    sha256: 'x',
  });
  await copies.apply(
    blocked.buffer.id,
    { type: 'START_DELETION' },
    {
      by: 'deleter-p',
      plan: {
        deletionId,
        archiveOperationId: blocked.operationId as string,
        archiveCopyId: blocked.archiveCopy?.id as string,
        archiveDigest: blocked.digest,
        archiveObjectSha256: blocked.digest.slice('sha256:'.length),
        path: `/data/buffer/${blocked.pkg}`,
        folder: true,
        rootPath: '/data/buffer',
        rootDevice: '1',
        rootInode: '2',
        holder: 'deleter-p',
        leaseMs: 60_000,
        members: [member(1, 'frame-0001.fits'), member(2, 'frame-0002.fits')],
        outcomes: [],
        detail: {},
      },
    },
  );
  const step = { deletionId, epoch: 1, holder: 'deleter-p', leaseMs: 60_000 };
  await deletions.step({ ...step, previous: { seq: 1, outcome: 'DELETED', reason: null } });
  await deletions.step({
    ...step,
    previous: { seq: 2, outcome: 'KEPT', reason: KEPT_REASON },
    finish: true,
  });
  await copies.apply(
    blocked.buffer.id,
    {
      type: 'DELETION_FAILED',
      error: `1 member(s) kept after revalidation: frame-0002.fits: ${KEPT_REASON}`,
    },
    {
      by: 'deleter-p',
      reason: 'members kept; an operator reviews and may re-plan',
      fence: { deletionId, epoch: 1, holder: 'deleter-p' },
      record: { state: 'DELETION_FAILED', detail: { copyId: blocked.buffer.id } },
    },
  );
  const copy = blocked.buffer;

  // A deletion whose deleter's lease ran out ten minutes ago and that nobody took over.
  const stalled = await archivedPackage(database, w, 'verified');
  await copies.apply(stalled.buffer.id, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-gone' });
  await copies.apply(
    stalled.buffer.id,
    { type: 'START_DELETION' },
    {
      by: 'deleter-gone',
      plan: {
        deletionId: timeOrderedId(Date.now()),
        archiveOperationId: stalled.operationId as string,
        archiveCopyId: stalled.archiveCopy?.id as string,
        archiveDigest: stalled.digest,
        archiveObjectSha256: stalled.digest.slice('sha256:'.length),
        path: `/data/buffer/${stalled.pkg}`,
        folder: false,
        rootPath: '/data/buffer',
        rootDevice: '1',
        rootInode: '2',
        holder: 'deleter-gone',
        leaseMs: -10 * MIN,
        members: [member(1, 'only.tar')],
        outcomes: [],
        detail: {},
      },
    },
  );

  // A deletion that finished: both members unlinked, the receipt written, the copy DELETED.
  const done = await archivedPackage(database, w, 'verified');
  await copies.apply(done.buffer.id, { type: 'SCHEDULE_DELETION' }, { by: 'deleter-q' });
  const doneDeletion = timeOrderedId(Date.now());
  await copies.apply(
    done.buffer.id,
    { type: 'START_DELETION' },
    {
      by: 'deleter-q',
      plan: {
        deletionId: doneDeletion,
        archiveOperationId: done.operationId as string,
        archiveCopyId: done.archiveCopy?.id as string,
        archiveDigest: done.digest,
        archiveObjectSha256: done.digest.slice('sha256:'.length),
        path: `/data/buffer/${done.pkg}`,
        folder: true,
        rootPath: '/data/buffer',
        rootDevice: '1',
        rootInode: '2',
        holder: 'deleter-q',
        leaseMs: 60_000,
        members: [member(1, 'frame-0001.fits'), member(2, 'frame-0002.fits')],
        outcomes: [],
        detail: {},
      },
    },
  );
  const doneStep = { deletionId: doneDeletion, epoch: 1, holder: 'deleter-q', leaseMs: 60_000 };
  await deletions.step({ ...doneStep, previous: { seq: 1, outcome: 'DELETED', reason: null } });
  await deletions.step({
    ...doneStep,
    previous: { seq: 2, outcome: 'DELETED', reason: null },
    finish: true,
  });
  await deletions.receipt({ ...doneStep, detail: { folderRemoved: true } });
  await copies.apply(
    done.buffer.id,
    { type: 'DELETION_SUCCEEDED' },
    { by: 'deleter-q', reason: 'receipt written: 2 deleted, 0 missing' },
  );

  // An archive that found another object at its key: never overwritten, FAILED for an operator.
  const conflictPkg = await w.artifacts.addRawDataPackage({ name: `rdp-conflict-${randomUUID()}` });
  // An archive of its own, apart from the one whose breaker is planted open.
  const conflictArchive = await w.artifacts.addLocation({
    site: w.archive.site,
    name: 'lta-conflict',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: '/data/lta-conflict',
  });
  const conflict = await store.create({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: conflictPkg,
      sourceLocationId: w.buffer.id,
      destinationLocationId: conflictArchive.id,
    },
  });
  await startOf(conflict, 1, 'worker-e');
  const records = new ArchiveRecordRepository(database);
  const identity = {
    operationId: conflict,
    attempt: 1,
    by: 'worker-e',
    archiveKey: `${conflictPkg}.tar`,
  };
  await records.append({
    ...identity,
    state: ArchiveState.PLANNED,
    manifest: { members: [], package: [] },
  });
  await records.append({
    ...identity,
    state: ArchiveState.CONFLICT,
    detail: { found: 'another object' },
  });
  await store.apply(conflict, {
    type: 'FAIL',
    attempt: 1,
    error: {
      message: `another object is at the archive key ${conflictPkg}.tar; never overwritten`,
      retryable: false,
      code: 'CONFLICT',
    },
  });

  // As operations stored before site routes, on the legacy queues (`<location type>_<operation
  // type>`): the queue views are pinned here on those names; the site queues' rows are pinned in
  // units.test.ts and served end to end in test/actors/siteRoutes.test.ts.
  const legacyType = Object.entries(DEFAULT_LOCATION_TYPE)
    .map(([kind, type]) => `when '${kind}' then '${type}'`)
    .join(' ');
  await database.execute(
    `update operation set route_site = null, route_location = null,
       location_type = case kind ${legacyType} end`,
  );
  return {
    world: w,
    store: new OperationStore(database),
    heartbeats: transport.heartbeats,
    close: () => transport.close(),
    ids: {
      pendingFresh,
      scheduledFresh,
      completed,
      staging,
      failed,
      cancelled,
      retryCap,
      stuckPending,
      stuckScheduled,
      stuckNoBeat,
      beating,
      nearDeadline,
      pastDeadline,
      parked,
      stuckStale,
      stuckHeld,
      unreadFresh,
      conflict,
      blockedArchive: blocked.operationId as string,
      bundling,
      packagingA: packageA.op,
      doneArchive: done.operationId as string,
    },
    /** The two branches of the bundling operation's lineage up: each package and its files. */
    lineage: { a: packageA, b: packageB },
    /** The finished deletion: its plan, and the package whose buffer copy it deleted. */
    deleted: { deletionId: doneDeletion, copyId: done.buffer.id, pkg: done.pkg },
    archiveCopy,
    deletionFailedCopy: copy.id,
    stalledCopy: stalled.buffer.id,
    /** Exactly what the attention list must hold: `<category> <subject id>`. */
    expected: [
      `stuck ${stuckPending}`,
      `stuck ${stuckScheduled}`,
      `stuck ${stuckNoBeat}`,
      `stuck ${stuckStale}`,
      `stuck ${stuckHeld}`,
      `deadline ${nearDeadline}`,
      `deadline ${pastDeadline}`,
      `retry_cap ${retryCap}`,
      `failed ${failed}`,
      `breaker_open ${OperationKind.LONG_TERM_ARCHIVE}|${w.archive.id}`,
      `deletion_failed ${copy.id}`,
      `deletion_stalled ${stalled.buffer.id}`,
      `archive_conflict ${conflict}`,
      `failed ${conflict}`,
      // The unpack queue, whose only holder's heartbeat went stale, and the bundling queue, which
      // no live worker reads (its dispatch just scheduled). Not the transfer queue: worker-g reads
      // it, idle, and its two-hour-old dispatch is listed as stuck instead.
      `queue_unserved buffer_data_transfer_unpacking`,
      `queue_unserved source_data_transfer_package_creation`,
    ].sort(),
  };
}
