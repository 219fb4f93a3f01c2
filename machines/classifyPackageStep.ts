import type { CircuitState } from './circuitBreaker.ts';
import { OperationKind } from './OperationKind.ts';
import { OperationStatus as S } from './operationMachine.ts';
import {
  derivePackageState,
  furthestDone,
  isLive,
  lostArchives,
  PACKAGE_STEP_KINDS,
  PACKAGE_STEPS,
  type PackageOperation,
  PackageState,
  type PackageStateFacts,
  stepOperations,
  unrecoveredFailures,
} from './packageState.ts';

/** One operation of a package's family with what says why it waits. */
export interface PackageOperationFact extends PackageOperation {
  /** `site/name` of its target location, or null. */
  readonly target: string | null;
  readonly attempt: number;
  readonly workerId: string | null;
  /** ms since the epoch; null when it has none. */
  readonly notBefore: number | null;
  /** When it entered its status, ms since the epoch. */
  readonly since: number;
  readonly lastError: { readonly message: string; readonly code?: string } | null;
  /** Its COMPLETE transition's id (COMPLETED only): what a pipeline's cursor is compared with. */
  readonly completedTransitionId: number | null;
  /** Its (kind, target)'s circuit breaker when that is not CLOSED. */
  readonly breaker: CircuitState | null;
  /** The fullest flow limit over its (kind, target) or its target's every-kind limit, if any. */
  readonly limit: { readonly max: number; readonly live: number } | null;
}

/** Everything the classification reads: the state's facts, richer operations, the pipeline. */
export interface PackageFacts extends PackageStateFacts {
  readonly operations: readonly PackageOperationFact[];
  /** The lowest cursor of the pipelines the database holds; null when no pipeline ever ran. */
  readonly pipelineCursor: number | null;
  /**
   * The member packages of its data transfer package and how many have a COMPLETED packaging
   * (bundling's fan-in); null when it is in none.
   */
  readonly bundle: { readonly members: number; readonly packaged: number } | null;
}

/** Why a package is where it is: a closed set, each with its own line. */
export const PACKAGE_WAITS = [
  'in_progress',
  'dispatched',
  'not_before',
  'breaker',
  'flow_limit',
  'due',
  'failed',
  'archive_lost',
  'leader_pass',
  'members',
  'no_bundle',
  'not_created',
  'not_started',
  'done',
] as const;
export type PackageWait = (typeof PACKAGE_WAITS)[number];

/** Which step a package is in and why it waits there. */
export interface PackageClassification {
  readonly state: PackageState;
  /** The kind of the step it is in or waits for; null when there is none (done, not started). */
  readonly kind: OperationKind | null;
  /** The operation that step is (or that holds it), or null when none exists yet. */
  readonly operationId: string | null;
  /** `site/name` where that step runs, when known. */
  readonly location: string | null;
  readonly wait: PackageWait;
  /** One line for an operator. */
  readonly why: string;
}

/** How a step reads in a sentence. */
export const STEP_LABEL: Readonly<Record<OperationKind, string>> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: 'packaging',
  [OperationKind.DATA_TRANSFER_PACKAGE]: 'bundling',
  [OperationKind.TRANSFER]: 'transfer',
  [OperationKind.UNPACK]: 'unpack',
  [OperationKind.LONG_TERM_ARCHIVE]: 'long-term archive',
  [OperationKind.STAGING]: 'staging',
});

const iso = (ms: number) => new Date(ms).toISOString();
const at = (o: PackageOperationFact) => (o.target === null ? '' : ` at ${o.target}`);

type Classified = Omit<PackageClassification, 'state'>;

function step(o: PackageOperationFact, wait: PackageWait, why: string): Classified {
  return { kind: o.kind, operationId: o.id, location: o.target, wait, why };
}

/** Live work: running, dispatched, or PENDING and what holds it (in the scheduler's order). */
function classifyLive(o: PackageOperationFact, now: number): Classified {
  const label = `${STEP_LABEL[o.kind]}${at(o)}`;
  if (o.status === S.IN_PROGRESS) {
    return step(
      o,
      'in_progress',
      `${label} in progress (attempt ${o.attempt}${o.workerId === null ? '' : `, worker ${o.workerId}`}) since ${iso(o.since)}`,
    );
  }
  if (o.status === S.SCHEDULED) {
    return step(
      o,
      'dispatched',
      `${label} dispatched to its queue since ${iso(o.since)}, waiting for a worker to take it`,
    );
  }
  if (o.notBefore !== null && o.notBefore > now) {
    return step(
      o,
      'not_before',
      `${label} waits until ${iso(o.notBefore)} (${o.attempt > 1 ? "a retry's backoff" : 'a delayed start'}), then is due`,
    );
  }
  if (o.breaker !== null) {
    return step(
      o,
      'breaker',
      `${label} is held by its circuit breaker (${o.breaker}): failures of ${o.kind}${at(o)} parked it; 'opstate breaker reset' once the cause is fixed`,
    );
  }
  if (o.limit !== null && o.limit.live >= o.limit.max) {
    return step(
      o,
      'flow_limit',
      `${label} waits on a flow limit${at(o)}: ${o.limit.live} of ${o.limit.max} running${o.limit.max === 0 ? ' (parked)' : ''}`,
    );
  }
  return step(
    o,
    'due',
    `${label} is due since ${iso(Math.max(o.since, o.notBefore ?? 0))}: the control plane's scheduler dispatches it at its next pass`,
  );
}

/** What comes after the furthest completed step when nothing runs and nothing failed. */
function classifyNext(facts: PackageFacts): Classified {
  const done = furthestDone(facts);
  const ops = stepOperations(facts);
  const cursor = facts.pipelineCursor;
  const unread = ops.find(
    (o) =>
      o.status === S.COMPLETED &&
      cursor !== null &&
      o.completedTransitionId !== null &&
      o.completedTransitionId > cursor,
  );
  if (unread !== undefined) {
    return step(
      unread,
      'leader_pass',
      `${STEP_LABEL[unread.kind]}${at(unread)} completed; the pipeline's leader pass has not read that completion yet (transition ${unread.completedTransitionId}, cursor at ${cursor}): it creates the next step when it does`,
    );
  }
  const rank = done === null ? -1 : (PACKAGE_STEPS[done]?.rank ?? -1);
  const next = PACKAGE_STEP_KINDS.find((k) => (PACKAGE_STEPS[k]?.rank ?? 0) > rank) ?? null;
  const none = { operationId: null, location: null };
  if (next === null) return { kind: null, ...none, wait: 'done', why: 'done' };
  if (facts.type === 'data_transfer_package' && facts.members.length === 0) {
    return {
      kind: next,
      ...none,
      wait: 'not_started',
      why: 'it carries no raw data package yet: nothing is bundled into it until packages are assigned to it',
    };
  }
  if (ops.length === 0 && facts.type === 'raw_data_package') {
    return {
      kind: next,
      ...none,
      wait: 'not_started',
      why: 'nothing has run on it yet: its packaging is the entry step, submitted for it',
    };
  }
  // Bundling's fan-in: a package waits for its siblings, a transfer package for its members.
  const bundlingRank = PACKAGE_STEPS[OperationKind.DATA_TRANSFER_PACKAGE]?.rank ?? 1;
  if ((PACKAGE_STEPS[next]?.rank ?? 0) <= bundlingRank) {
    if (facts.transferPackageId === null || facts.bundle === null) {
      return {
        kind: next,
        ...none,
        wait: 'no_bundle',
        why: 'packaged, but in no data transfer package yet: nothing bundles it until it is assigned one',
      };
    }
    if (facts.bundle.packaged < facts.bundle.members) {
      return {
        kind: next,
        ...none,
        wait: 'members',
        why: `bundling waits for its transfer package's members: ${facts.bundle.packaged} of ${facts.bundle.members} packaged`,
      };
    }
  }
  return {
    kind: next,
    ...none,
    wait: 'not_created',
    why: `no ${STEP_LABEL[next]} exists${done === null ? '' : ` after its ${STEP_LABEL[done]}`}: ${
      cursor === null
        ? 'no pipeline runs on this database, so it is submitted (opstate submit)'
        : 'the pipeline read the completion before it and created none (its stage was not due, or the pipeline has no such stage)'
    }`,
  };
}

/**
 * Which step a package is in and why it waits there (the transferring step included: bundling,
 * transfer or unpack, and at which location), from the same facts its state is derived from:
 * - live work, the least advanced first: IN_PROGRESS at X, dispatched to its queue, or PENDING
 *   and held by its `notBefore`, its circuit breaker, a full flow limit, or due for the scheduler;
 * - else a failed step that needs an operator (a retry resumes its branch);
 * - else an archive whose copy is gone;
 * - else what comes next: a completion the pipeline's leader pass has not read yet, bundling
 *   waiting for the other members of its transfer package, a package in no transfer package, a
 *   next step nobody created, nothing run yet, or done.
 *
 * @example
 * ```ts
 * const { state, wait, why } = classifyPackageStep(facts, clock.now());
 * // 'TRANSFERRING', 'flow_limit', 'transfer at cologne/buffer waits on a flow limit …'
 * ```
 */
export function classifyPackageStep(facts: PackageFacts, now: number): PackageClassification {
  const state = derivePackageState(facts);
  const ops = stepOperations(facts);
  const live = ops.filter(isLive);
  if (live.length > 0) {
    const rank = PACKAGE_STEPS[(live[0] as PackageOperationFact).kind]?.rank;
    // Of the least advanced live work, the one furthest along (running before dispatched before PENDING).
    const order = [S.IN_PROGRESS, S.SCHEDULED, S.PENDING] as string[];
    const first = live
      .filter((o) => PACKAGE_STEPS[o.kind]?.rank === rank)
      .sort((a, b) => order.indexOf(a.status) - order.indexOf(b.status))[0] as PackageOperationFact;
    return { state, ...classifyLive(first, now) };
  }
  const failed = unrecoveredFailures(facts)[0];
  if (failed !== undefined) {
    const cancelled = failed.lastError?.code === 'CANCELLED';
    return {
      state,
      ...step(
        failed,
        'failed',
        `${STEP_LABEL[failed.kind]}${at(failed)} ${cancelled ? 'was cancelled by an operator' : `FAILED after attempt ${failed.attempt}`}${failed.lastError === null ? '' : `: ${failed.lastError.message}`}; its branch stops here until 'opstate retry ${failed.id}'`,
      ),
    };
  }
  const lost = lostArchives(facts)[0];
  if (lost !== undefined) {
    return {
      state,
      ...step(
        lost,
        'archive_lost',
        `its long-term archive${at(lost)} completed, but the package's copy there is gone: it is no longer archived there`,
      ),
    };
  }
  if (state === PackageState.ARCHIVED) {
    const where = [
      ...new Set(
        ops
          .filter((o) => o.kind === OperationKind.LONG_TERM_ARCHIVE && o.status === S.COMPLETED)
          .map((o) => o.target ?? '?'),
      ),
    ];
    return {
      state,
      kind: null,
      operationId: null,
      location: null,
      wait: 'done',
      why: `archived at ${where.join(', ')}`,
    };
  }
  return { state, ...classifyNext(facts) };
}
