import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import type { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationInspection } from '../persistence/inspectOperation.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import type { HandlerContext } from '../worker/OperationHandler.ts';
import type { ArchiveStore } from './ArchiveStore.ts';
import type { ArchiveCipher } from './archiveCipher.ts';
import { archiveStoreAt } from './registerArchiveStore.ts';
import { checksumOf, type StoredObject } from './storage.ts';

/**
 * Where a crash drill may stop the archive handler. Each runs at its point inside the attempt; a
 * drill makes it kill the process. Never set in normal operation.
 */
export interface ArchiveFaults {
  /** The plan is recorded; nothing is written to the archive yet. */
  beforeUpload?(ctx: HandlerContext): void | Promise<void>;
  /** Half the object is in its temporary file; the key is still free. */
  midUpload?(ctx: HandlerContext): void | Promise<void>;
  /** The object is at its key and UPLOADED recorded, the upload step not yet (a slow confirmation). */
  afterStore?(ctx: HandlerContext): void | Promise<void>;
  /**
   * The upload step is recorded, the read-back not started (a drill may damage the object here):
   * `location` is where the store keeps it (`ArchiveStore.describe`).
   */
  afterUpload?(ctx: HandlerContext, location: string): void | Promise<void>;
  /** The object was read back (READ_BACK recorded), its members not yet VERIFIED. */
  duringReadBack?(ctx: HandlerContext): void | Promise<void>;
  /** VERIFIED and the verify step are recorded; the operation is not yet COMPLETED. */
  afterVerified?(ctx: HandlerContext): void | Promise<void>;
}

/** What the reference stage handlers need from where they run. */
export interface StageEnvironment {
  /** The local folder behind a location (its `storageRoot`); throws for an unknown location. */
  storageRootOf(locationId: string): string;
  /**
   * The archive store of a long-term-archive location. Unset, it is the store registered for the
   * scheme of the location's storage root (`archiveStoreAt`; a path is a local folder).
   */
  archiveStoreOf?(locationId: string): ArchiveStore | Promise<ArchiveStore>;
  /** Encrypts archives at rest when given (see `archiveCipherFromEnv`). */
  readonly cipher?: ArchiveCipher;
  /** Drills only: crash points of the archive handler. */
  readonly faults?: ArchiveFaults;
}

/**
 * A required stage field of the operation, e.g. `rawDataPackageId`.
 *
 * @example
 * ```ts
 * const packageId = fieldOf(await ctx.inspect(), 'rawDataPackageId');
 * ```
 */
export function fieldOf(view: OperationInspection, key: string): string {
  const value = view.fields[key];
  if (value === undefined || value === null) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${view.kind} operation ${view.id} has no ${key}`,
    );
  }
  return value;
}

/**
 * The operation's input copies of one artifact type (optionally at one location), sorted by path
 * so that a package built from them is the same bytes on every attempt. None is a `BAD_INPUT`.
 *
 * @example
 * ```ts
 * const files = inputsOf(view, ArtifactType.RAW_DATA_FILE);
 * ```
 */
export function inputsOf(
  view: OperationInspection,
  artifactType: ArtifactType,
  locationId?: string,
): PhysicalCopyRecord[] {
  const found = view.inputs
    .filter((c) => c.artifactType === artifactType)
    .filter((c) => locationId === undefined || c.locationId === locationId)
    .sort((a, b) => String(a.path).localeCompare(String(b.path)));
  if (found.length === 0) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${view.kind} operation ${view.id} needs an input copy of a ${artifactType}${locationId === undefined ? '' : ` at location ${locationId}`}; submit it with inputs: [copyId]`,
    );
  }
  return found;
}

/**
 * The operation's one input copy of an artifact type at a location (the first, if several).
 *
 * @example
 * ```ts
 * const source = inputOf(view, ArtifactType.DATA_TRANSFER_PACKAGE, sourceLocationId);
 * ```
 */
export function inputOf(
  view: OperationInspection,
  artifactType: ArtifactType,
  locationId: string,
): PhysicalCopyRecord {
  return inputsOf(view, artifactType, locationId)[0] as PhysicalCopyRecord;
}

/**
 * The output copy an operation reports for a stored object.
 *
 * @example
 * ```ts
 * return { outputs: [outputCopy('raw_data_package', packageId, locationId, stored)] };
 * ```
 */
export function outputCopy(
  artifactType: ArtifactType,
  artifactId: string,
  locationId: string,
  stored: Pick<StoredObject, 'path' | 'sha256' | 'size'>,
): OutputCopy {
  return {
    artifactType,
    artifactId,
    locationId,
    path: stored.path,
    checksum: checksumOf(stored.sha256),
    size: stored.size,
  };
}

/**
 * The archive store of a location in an environment: its own `archiveStoreOf`, else the store
 * registered for the scheme of the location's storage root.
 *
 * @example
 * ```ts
 * const store = await archiveStoreOf(env, archiveLocationId);
 * ```
 */
export function archiveStoreOf(
  env: StageEnvironment,
  locationId: string,
): ArchiveStore | Promise<ArchiveStore> {
  return env.archiveStoreOf?.(locationId) ?? archiveStoreAt(env.storageRootOf(locationId));
}
