import { sql } from 'drizzle-orm';
import { ArchiveState } from '../machines/ArchiveState.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ArchiveRecordRepository } from '../persistence/ArchiveRecordRepository.ts';
import { checkId, notFound } from '../persistence/applyEvents.ts';
import { DeletionRepository } from '../persistence/DeletionRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { Manifest } from './packageFormat.ts';
import type { ArchiveExpectation } from './verifyArchive.ts';

/** An archive as its record describes it: where it is and what it must be. */
export interface RecordedArchive {
  readonly operationId: string;
  readonly archiveLocationId: string;
  /** The archive location's storage root, which names its store (`archiveStoreAt`). */
  readonly storageRoot: string;
  readonly generation: number;
  readonly expected: ArchiveExpectation;
  readonly encrypted: boolean;
  readonly keyId: string | null;
  /** Every member of the package as planned. */
  readonly manifest: Manifest['members'];
}

/**
 * Reads, from the archive record alone, what an archive object must be: the key and the first
 * write's object version and whole-object digest (UPLOADED), the package digest and manifest
 * (PLANNED of the same generation), the archive location's storage root, and every source member a
 * deletion removed relying on it (the bytes the archive must give back). Needs no worker. `NOT_FOUND`
 * for an unknown operation; `BAD_INPUT` for another kind or an archive never uploaded.
 *
 * @example
 * ```ts
 * const recorded = await loadRecordedArchive(database, operationId);
 * const store = archiveStoreAt(recorded.storageRoot);
 * const verdict = await verifyArchive(store, recorded.expected, archiveCipherFromEnv());
 * ```
 */
export async function loadRecordedArchive(
  database: Database,
  operationId: string,
): Promise<RecordedArchive> {
  const id = checkId(operationId);
  const [op] = await database.execute(sql`
    select o.kind, l.destination_location_id, d.storage_root
    from operation o
    left join long_term_archive_operation l on l.operation_id = o.id
    left join data_location d on d.id = l.destination_location_id
    where o.id = ${id}::uuid`);
  if (op === undefined) throw notFound(id);
  if (op.kind !== OperationKind.LONG_TERM_ARCHIVE) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `operation ${id} is a ${String(op.kind)} operation; archive verify and restore take a long_term_archive operation`,
    );
  }
  const records = await new ArchiveRecordRepository(database).list(id);
  const uploads = records.filter((r) => r.state === ArchiveState.UPLOADED);
  const latest = uploads.at(-1);
  if (latest === undefined) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `operation ${id} never uploaded an archive (last state ${records.at(-1)?.state ?? 'none'}); there is nothing to verify or restore`,
    );
  }
  const first =
    uploads.find((r) => r.generation === latest.generation && r.archiveKey === latest.archiveKey) ??
    latest;
  const planned = [...records]
    .reverse()
    .find(
      (r) =>
        r.state === ArchiveState.PLANNED &&
        r.generation === latest.generation &&
        r.archiveKey === latest.archiveKey,
    );
  const manifest = (planned?.manifest as { package?: Manifest['members'] } | null)?.package ?? [];
  return {
    operationId: id,
    archiveLocationId: String(op.destination_location_id),
    storageRoot: String(op.storage_root),
    generation: latest.generation,
    expected: {
      key: String(first.archiveKey),
      objectSha256: String(first.objectSha256),
      objectVersion: first.objectVersion,
      contentSha256: String(planned?.contentSha256 ?? latest.contentSha256),
      members: manifest,
      deleted: await new DeletionRepository(database).deletedMembersOf(id),
    },
    encrypted: latest.encrypted === true,
    keyId: latest.keyId,
    manifest,
  };
}

/**
 * The long-term archive operation that produced an archive copy (a COMPLETED one, linked to the
 * copy as its output), or undefined for a copy no archive operation produced (registered by hand).
 *
 * @example
 * ```ts
 * const operationId = await archiveOperationOf(database, archiveCopy.id);
 * ```
 */
export async function archiveOperationOf(
  database: Database,
  copyId: string,
): Promise<string | undefined> {
  const [row] = await database.execute(sql`
    select x.operation_id from operation_output x
    join operation o on o.id = x.operation_id
      and o.kind = ${OperationKind.LONG_TERM_ARCHIVE} and o.status = 'COMPLETED'
    where x.physical_copy_id = ${checkId(copyId)}::uuid
    order by o.created_at, o.id
    limit 1`);
  return row === undefined ? undefined : String(row.operation_id);
}
