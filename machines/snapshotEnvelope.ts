import { createRequire } from 'node:module';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';

const require = createRequire(import.meta.url);

/** The xstate version this build runs; stored beside every snapshot. */
export const XSTATE_VERSION: string = (require('xstate/package.json') as { version: string })
  .version;

export const OPERATION_MACHINE_ID = 'operation';
/**
 * Bump on any change to the machine that an old snapshot could not be restored into (a renamed
 * state, a new required context field), and add the step from the previous version to
 * `SNAPSHOT_MIGRATIONS`. The golden snapshots in `test/machines/golden/` must keep restoring.
 */
export const OPERATION_MACHINE_VERSION = 1;

/** What is stored beside each snapshot so that it is never restored into the wrong machine. */
export interface SnapshotEnvelope {
  readonly machineId: string;
  readonly machineVersion: number;
  readonly xstateVersion: string;
}

/** A persisted snapshot with its envelope, as `opstate inspect` and the golden files hold it. */
export interface EnvelopedSnapshot extends SnapshotEnvelope {
  readonly snapshot: unknown;
}

/**
 * One step per machine version: the function turns a snapshot of version `n` into version
 * `n + 1`. Empty while only version 1 exists.
 */
const SNAPSHOT_MIGRATIONS: Readonly<Record<number, (snapshot: unknown) => unknown>> = {};

/** The envelope a snapshot written by this build carries. */
export function currentEnvelope(): SnapshotEnvelope {
  return {
    machineId: OPERATION_MACHINE_ID,
    machineVersion: OPERATION_MACHINE_VERSION,
    xstateVersion: XSTATE_VERSION,
  };
}

/**
 * Wraps a persisted snapshot in the current envelope.
 *
 * @example
 * ```ts
 * const stored = envelop(decision.snapshot); // { machineId: 'operation', machineVersion: 1, ... }
 * ```
 */
export function envelop(snapshot: unknown): EnvelopedSnapshot {
  return { ...currentEnvelope(), snapshot };
}

/**
 * Brings a stored snapshot up to the current machine version, or refuses it with a clear error:
 * a snapshot of another machine, of a version newer than this build, or of an old version with no
 * migration is never restored blindly.
 *
 * @example
 * ```ts
 * const snapshot = upgradeSnapshot(row); // throws OpstateError SNAPSHOT_VERSION when unknown
 * ```
 */
export function upgradeSnapshot(stored: EnvelopedSnapshot): unknown {
  if (stored.machineId !== OPERATION_MACHINE_ID) {
    throw new OpstateError(
      OpstateErrorCode.SNAPSHOT_VERSION,
      `snapshot belongs to machine '${stored.machineId}', not '${OPERATION_MACHINE_ID}'; it cannot be restored as an operation`,
      { details: { ...pickEnvelope(stored) } },
    );
  }
  if (!Number.isInteger(stored.machineVersion) || stored.machineVersion < 1) {
    throw new OpstateError(
      OpstateErrorCode.SNAPSHOT_VERSION,
      `snapshot has machine version ${String(stored.machineVersion)}, which is not a version; the row is damaged`,
      { details: { ...pickEnvelope(stored) } },
    );
  }
  if (stored.machineVersion > OPERATION_MACHINE_VERSION) {
    throw new OpstateError(
      OpstateErrorCode.SNAPSHOT_VERSION,
      `snapshot was written by operation machine version ${stored.machineVersion}, newer than this build's ${OPERATION_MACHINE_VERSION}; upgrade opstate on this host before it touches the operation`,
      { details: { ...pickEnvelope(stored) } },
    );
  }
  let snapshot = stored.snapshot;
  for (let v = stored.machineVersion; v < OPERATION_MACHINE_VERSION; v++) {
    const step = SNAPSHOT_MIGRATIONS[v];
    if (step === undefined) {
      throw new OpstateError(
        OpstateErrorCode.SNAPSHOT_VERSION,
        `no migration from operation machine version ${v} to ${v + 1}; add one to SNAPSHOT_MIGRATIONS`,
        { details: { ...pickEnvelope(stored) } },
      );
    }
    snapshot = step(snapshot);
  }
  return snapshot;
}

function pickEnvelope(e: SnapshotEnvelope): SnapshotEnvelope {
  return {
    machineId: e.machineId,
    machineVersion: e.machineVersion,
    xstateVersion: e.xstateVersion,
  };
}
