import type { HandlerContext } from '../actors/Worker.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import type { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationInspection } from '../persistence/inspectOperation.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import { checksumOf, type StoredObject } from './storage.ts';

/** What the reference stage handlers need from where they run. */
export interface StageEnvironment {
  /** The local folder behind a location (its `storageRoot`); throws for an unknown location. */
  storageRootOf(locationId: string): string;
  /**
   * Drills only: runs inside the archive's upload step after the object is written and before the
   * step is recorded (a slow storage confirmation, the window where a crash hurts most).
   */
  afterArchiveWrite?(ctx: HandlerContext): Promise<void>;
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
