import { createHash, randomUUID } from 'node:crypto';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import type { PhysicalCopyRecord } from '../../persistence/ArtifactRepository.ts';
import type { DeletionPolicy } from '../../persistence/DeletionPolicyRepository.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import type { World } from './fixtures.ts';

const hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** A package with a buffer copy, and (unless told otherwise) its archive, as the store sees them. */
export interface ArchivedPackage {
  readonly pkg: string;
  readonly buffer: PhysicalCopyRecord;
  readonly digest: string;
  /** The long-term-archive operation (absent with `archive: 'none'`). */
  readonly operationId?: string;
  readonly archiveCopy?: PhysicalCopyRecord;
}

/**
 * Builds, through the store's own writes, a package whose buffer copy has a checksum and whose
 * long-term archive is in the requested state: `verified` (completed, VERIFIED, same digest),
 * `unverified` (completed with only UPLOADED recorded: an archive completed before its kind's output
 * contract required the VERIFIED record, as a database upgraded from then holds), `other-digest`
 * (verified, but of other
 * bytes), or `none` (no archive at all: the buffer copy is the only copy).
 */
export async function archivedPackage(
  database: Database,
  w: World,
  archive: 'verified' | 'unverified' | 'other-digest' | 'none' = 'verified',
  /** Who rewrites history for 'unverified' (the schema's owner where the runtime role may not). */
  owner: Database = database,
): Promise<ArchivedPackage> {
  const store = new OperationStore(database);
  const records = new ArchiveRecordRepository(database);
  const pkg = await w.artifacts.addRawDataPackage({ name: `rdp-${randomUUID()}` });
  const content = hex(pkg);
  const digest = `sha256:${content}`;
  const { copy: buffer } = await w.artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg,
    locationId: w.buffer.id,
    path: `/data/buffer/${pkg}`,
    checksum: digest,
    size: 10,
  });
  if (archive === 'none') return { pkg, buffer, digest };
  const operationId = await store.create({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: pkg,
      sourceLocationId: w.buffer.id,
      destinationLocationId: w.archive.id,
    },
    inputs: [buffer.id],
  });
  await store.apply(operationId, { type: 'SCHEDULE' });
  await store.apply(operationId, { type: 'START', attempt: 1, workerId: 'w' });
  const archived = archive === 'other-digest' ? hex(`${pkg}-other`) : content;
  const identity = {
    operationId,
    attempt: 1,
    by: 'w',
    archiveKey: `${pkg}.tar`,
    objectVersion: '1:2:3',
    objectSha256: archived,
    contentSha256: archived,
    size: 10,
  };
  await records.append({
    ...identity,
    state: ArchiveState.PLANNED,
    manifest: { members: [], package: [] },
  });
  await records.append({ ...identity, state: ArchiveState.UPLOADED });
  await records.append({ ...identity, state: ArchiveState.READ_BACK });
  await records.append({ ...identity, state: ArchiveState.VERIFIED });
  await store.complete(operationId, 1, [
    {
      artifactType: 'raw_data_package',
      artifactId: pkg,
      locationId: w.archive.id,
      path: `/lta/${pkg}.tar`,
      checksum: `sha256:${archived}`,
      size: 10,
    },
  ]);
  if (archive === 'unverified') {
    // Today a long-term archive completes only with its VERIFIED record; an earlier release let it
    // complete at UPLOADED. That history, as such a database holds it: the record ends at
    // UPLOADED, and the deleters' list (which enlists only verified archives) does not name it.
    await owner.execute(
      `delete from archive_record where operation_id = '${operationId}' and state in ('READ_BACK', 'VERIFIED')`,
    );
    // (A database migrated only up to before the list has no list to strike it off.)
    const [list] = await database.execute<{ present: boolean }>(
      `select to_regclass('deletion_candidate') is not null as present`,
    );
    if (list?.present === true) {
      await owner.execute(
        `delete from deletion_candidate where archive_operation_id = '${operationId}'`,
      );
    }
  }
  const archiveCopy = await w.artifacts.findLiveCopy('raw_data_package', pkg, w.archive.id);
  return { pkg, buffer, digest, operationId, ...(archiveCopy ? { archiveCopy } : {}) };
}

/** A policy that cleans buffer copies as soon as their archive completed. */
export function bufferPolicyWithoutGrace(): DeletionPolicy {
  return {
    cleanLocationTypes: [LocationType.BUFFER],
    graceSeconds: 0,
    protectedPrefixes: [],
    maxFailures: 3,
    updatedBy: 'test',
    updatedAt: new Date(),
  };
}
