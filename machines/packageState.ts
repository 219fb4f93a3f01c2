import { OperationKind } from './OperationKind.ts';
import { type OperationStatus, OperationStatus as S } from './operationMachine.ts';

/**
 * The lifecycle of a package artifact, derived from the statuses of the operations that touch it
 * (never stored independently of them, never folded into an operation's status).
 */
export const PackageState = {
  PLANNED: 'PLANNED',
  PACKAGING: 'PACKAGING',
  PACKAGED: 'PACKAGED',
  TRANSFERRING: 'TRANSFERRING',
  TRANSFERRED: 'TRANSFERRED',
  ARCHIVING: 'ARCHIVING',
  ARCHIVED: 'ARCHIVED',
  FAILED: 'FAILED',
} as const;
export type PackageState = (typeof PackageState)[keyof typeof PackageState];

export interface PackageOperation {
  readonly kind: OperationKind;
  readonly status: OperationStatus;
}

const LIVE: ReadonlySet<OperationStatus> = new Set([S.PENDING, S.SCHEDULED, S.IN_PROGRESS]);
const MOVING: readonly OperationKind[] = [
  OperationKind.DATA_TRANSFER_PACKAGE,
  OperationKind.TRANSFER,
  OperationKind.UNPACK,
];

/**
 * Derives a package's state from its operations, furthest pipeline step first: an archive done
 * wins over everything; live work reports where it is; a failure with nothing live reports
 * FAILED; otherwise the last completed step. Staging does not change a package's state.
 *
 * @example
 * ```ts
 * derivePackageState([{ kind: OperationKind.RAW_DATA_PACKAGE, status: 'COMPLETED' },
 *                     { kind: OperationKind.LONG_TERM_ARCHIVE, status: 'IN_PROGRESS' }]);
 * // 'ARCHIVING'
 * ```
 */
export function derivePackageState(operations: readonly PackageOperation[]): PackageState {
  const has = (kinds: readonly OperationKind[], pred: (s: OperationStatus) => boolean) =>
    operations.some((o) => kinds.includes(o.kind) && pred(o.status));
  const live = (s: OperationStatus) => LIVE.has(s);
  const done = (s: OperationStatus) => s === S.COMPLETED;

  if (has([OperationKind.LONG_TERM_ARCHIVE], done)) return PackageState.ARCHIVED;
  if (has([OperationKind.LONG_TERM_ARCHIVE], live)) return PackageState.ARCHIVING;
  if (has(MOVING, live)) return PackageState.TRANSFERRING;
  if (has([OperationKind.RAW_DATA_PACKAGE], live)) return PackageState.PACKAGING;
  const anyLive = operations.some((o) => o.kind !== OperationKind.STAGING && live(o.status));
  const anyFailed = operations.some(
    (o) => o.kind !== OperationKind.STAGING && o.status === S.FAILED,
  );
  if (anyFailed && !anyLive) {
    // A failure counts only while no later retry of the same kind has completed.
    const failedKinds = new Set(operations.filter((o) => o.status === S.FAILED).map((o) => o.kind));
    const recovered = [...failedKinds].every((k) =>
      operations.some((o) => o.kind === k && done(o.status)),
    );
    if (!recovered) return PackageState.FAILED;
  }
  if (has([OperationKind.TRANSFER, OperationKind.UNPACK], done)) return PackageState.TRANSFERRED;
  if (has([OperationKind.RAW_DATA_PACKAGE, OperationKind.DATA_TRANSFER_PACKAGE], done)) {
    return PackageState.PACKAGED;
  }
  return PackageState.PLANNED;
}
