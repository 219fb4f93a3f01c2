import { OperationKind } from './OperationKind.ts';
import { type OperationStatus, OperationStatus as S } from './operationMachine.ts';

/**
 * The lifecycle of a package artifact (a raw data package or a data transfer package), derived
 * from the operations that touch it and the copies they left (`derivePackageState`): never stored,
 * never set by hand, never folded into an operation's status.
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

/** Every package state, in lifecycle order (FAILED last). */
export const PACKAGE_STATES: readonly PackageState[] = Object.freeze(Object.values(PackageState));

/** The two artifacts that have a package state. */
export const PACKAGE_TYPES = ['raw_data_package', 'data_transfer_package'] as const;
export type PackageType = (typeof PACKAGE_TYPES)[number];

/** One operation on a package's family, as much as its state needs. */
export interface PackageOperation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  /** The package its subtype row names: a raw data package or a data transfer package id. */
  readonly subjectId: string;
  /** The location it acts on (its destination, else its location); null on rows older than it. */
  readonly targetLocationId: string | null;
}

/** One copy of a package of the family: where it is and whether it is still there. */
export interface PackageCopy {
  readonly artifactId: string;
  readonly locationId: string;
  readonly status: string;
}

/**
 * What a package's state is derived from, read in one place (`persistence/reads/`):
 * - `members`: the raw data packages its per-package stages (packaging, long-term archive) act
 *   on: itself for a raw data package, the packages it carries for a data transfer package;
 * - `transferPackageId`: the data transfer package its bundling, transfers and unpacks act on:
 *   its own for a raw data package (null before it is assigned one), itself for a transfer package;
 * - `operations`: every operation on those (staging included; it does not move the state);
 * - `copies`: the copies of the members (an archive counts while its copy is still there).
 */
export interface PackageStateFacts {
  readonly type: PackageType;
  readonly id: string;
  readonly members: readonly string[];
  readonly transferPackageId: string | null;
  readonly operations: readonly PackageOperation[];
  readonly copies: readonly PackageCopy[];
}

/**
 * How each kind moves a package: its place in the pipeline, and the state live and done work gives.
 * The transferring step runs from bundling to unpack: a package bundled or transferred but not
 * unpacked yet is still TRANSFERRING (which of the three, and why it waits, is its classification),
 * so the state only ever moves forward as the pipeline runs.
 */
export interface PackageStep {
  readonly rank: number;
  readonly live: PackageState;
  readonly done: PackageState;
  /** Acts on each member package (fan-in before bundling, fan-out after unpack), not the bundle. */
  readonly perMember: boolean;
}

/** Every kind's step; staging (on request, beside the lifecycle) moves no package. */
export const PACKAGE_STEPS: Readonly<Record<OperationKind, PackageStep | null>> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: {
    rank: 0,
    live: PackageState.PACKAGING,
    done: PackageState.PACKAGED,
    perMember: true,
  },
  [OperationKind.DATA_TRANSFER_PACKAGE]: {
    rank: 1,
    live: PackageState.TRANSFERRING,
    done: PackageState.TRANSFERRING,
    perMember: false,
  },
  [OperationKind.TRANSFER]: {
    rank: 2,
    live: PackageState.TRANSFERRING,
    done: PackageState.TRANSFERRING,
    perMember: false,
  },
  [OperationKind.UNPACK]: {
    rank: 3,
    live: PackageState.TRANSFERRING,
    done: PackageState.TRANSFERRED,
    perMember: false,
  },
  [OperationKind.LONG_TERM_ARCHIVE]: {
    rank: 4,
    live: PackageState.ARCHIVING,
    done: PackageState.ARCHIVED,
    perMember: true,
  },
  [OperationKind.STAGING]: null,
});

/** The kinds that move a package, in pipeline order. */
export const PACKAGE_STEP_KINDS: readonly OperationKind[] = Object.freeze(
  (Object.keys(PACKAGE_STEPS) as OperationKind[])
    .filter((k) => PACKAGE_STEPS[k] !== null)
    .sort((a, b) => (PACKAGE_STEPS[a]?.rank ?? 0) - (PACKAGE_STEPS[b]?.rank ?? 0)),
);

const LIVE: ReadonlySet<OperationStatus> = new Set([S.PENDING, S.SCHEDULED, S.IN_PROGRESS]);

/** Whether an operation is PENDING, SCHEDULED or IN_PROGRESS. */
export const isLive = (o: { readonly status: OperationStatus }): boolean => LIVE.has(o.status);

const rankOf = (o: { readonly kind: OperationKind }): number => PACKAGE_STEPS[o.kind]?.rank ?? -1;
const keyOf = (o: PackageOperation) => `${o.kind}|${o.subjectId}|${o.targetLocationId ?? ''}`;

/** The operations that move the package (staging left out), least advanced first. */
export function stepOperations<T extends PackageOperation>(facts: {
  readonly operations: readonly T[];
}): T[] {
  return facts.operations
    .filter((o) => PACKAGE_STEPS[o.kind] !== null)
    .sort((a, b) => rankOf(a) - rankOf(b));
}

/**
 * FAILED operations no later operation of the same (kind, subject, location) has completed: a
 * branch stopped until an operator retries it.
 */
export function unrecoveredFailures<T extends PackageOperation>(facts: {
  readonly operations: readonly T[];
}): T[] {
  const ops = stepOperations(facts);
  const completed = new Set(ops.filter((o) => o.status === S.COMPLETED).map(keyOf));
  return ops.filter((o) => o.status === S.FAILED && !completed.has(keyOf(o)));
}

/**
 * A COMPLETED long-term archive whose copy of its package at its archive location is gone (no
 * copy there, or only DELETED ones): the package is no longer archived there.
 */
export function lostArchives<T extends PackageOperation>(facts: {
  readonly operations: readonly T[];
  readonly copies: readonly PackageCopy[];
}): T[] {
  return facts.operations.filter(
    (o) =>
      o.kind === OperationKind.LONG_TERM_ARCHIVE &&
      o.status === S.COMPLETED &&
      !facts.copies.some(
        (c) =>
          c.artifactId === o.subjectId &&
          c.locationId === o.targetLocationId &&
          c.status !== 'DELETED',
      ),
  );
}

/** Whether every subject a kind acts on for this package has a completion that still counts. */
function kindDone(facts: PackageStateFacts, kind: OperationKind): boolean {
  const step = PACKAGE_STEPS[kind];
  if (step === null) return false;
  const subjects = step.perMember
    ? facts.members
    : facts.transferPackageId === null
      ? []
      : [facts.transferPackageId];
  if (subjects.length === 0) return false;
  const lost = new Set(lostArchives(facts).map((o) => o.id));
  return subjects.every((s) =>
    facts.operations.some(
      (o) => o.kind === kind && o.subjectId === s && o.status === S.COMPLETED && !lost.has(o.id),
    ),
  );
}

/** The most advanced kind whose every subject completed (and, for an archive, whose copy is still there). */
export function furthestDone(facts: PackageStateFacts): OperationKind | null {
  const done = PACKAGE_STEP_KINDS.filter((k) => kindDone(facts, k));
  return done.at(-1) ?? null;
}

/**
 * Derives a package's state from its facts, the same way for a raw data package and a data
 * transfer package:
 * 1. live work (PENDING, SCHEDULED, IN_PROGRESS) anywhere in the family: the state of the least
 *    advanced of it (packaging → PACKAGING; bundling, transfer, unpack → TRANSFERRING; long-term
 *    archive → ARCHIVING), so a package still moving on one branch is not called done;
 * 2. else a FAILED operation no later one of the same (kind, subject, location) completed: FAILED;
 * 3. else the furthest step every subject of it completed: packaging → PACKAGED, bundling or
 *    transfer → TRANSFERRING (the transferring step is not over before unpack), unpack →
 *    TRANSFERRED, long-term archive → ARCHIVED (while the archive's copy is still at its archive
 *    location: an archive whose copy is gone does not count);
 * 4. else PLANNED.
 * A per-package step (packaging, archive) of a data transfer package is done when it is done for
 * every member. Staging does not change a package's state.
 *
 * @example
 * ```ts
 * derivePackageState({ type: 'raw_data_package', id: p, members: [p], transferPackageId: null,
 *   operations: [{ id, kind: OperationKind.RAW_DATA_PACKAGE, status: 'IN_PROGRESS', subjectId: p,
 *   targetLocationId: src }], copies: [] });
 * // 'PACKAGING'
 * ```
 */
export function derivePackageState(facts: PackageStateFacts): PackageState {
  const ops = stepOperations(facts);
  const live = ops.find(isLive);
  if (live !== undefined) return (PACKAGE_STEPS[live.kind] as PackageStep).live;
  if (unrecoveredFailures(facts).length > 0) return PackageState.FAILED;
  const done = furthestDone(facts);
  return done === null ? PackageState.PLANNED : (PACKAGE_STEPS[done] as PackageStep).done;
}

/**
 * Narrows an outside value (a flag, a query parameter) to a package state.
 *
 * @example
 * ```ts
 * if (!isPackageState(value)) throw new UsageError(`use one of ${PACKAGE_STATES.join(', ')}`);
 * ```
 */
export function isPackageState(value: unknown): value is PackageState {
  return typeof value === 'string' && (PACKAGE_STATES as readonly string[]).includes(value);
}
