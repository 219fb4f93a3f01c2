import { transition } from 'xstate';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';
import {
  PHYSICAL_COPY_EVENT_TYPES,
  PHYSICAL_COPY_STATUSES,
  type PhysicalCopyContext,
  type PhysicalCopyEvent,
  type PhysicalCopyEventType,
  type PhysicalCopyGuardFacts,
  type PhysicalCopyStatus,
  physicalCopyMachine,
} from './physicalCopyMachine.ts';

/** A copy's deletion state as stored: its status column and the machine's context columns. */
export interface CopyState extends PhysicalCopyContext {
  readonly status: PhysicalCopyStatus;
}

/**
 * Everything the store read about a copy for a decision: the guard facts plus what an operator
 * needs to understand a refusal (which archive, which claim, why no archive counts).
 */
export interface CopyFacts extends PhysicalCopyGuardFacts {
  /** The verified archive copy a deletion relies on, when there is one. */
  readonly archive: {
    readonly copyId: string;
    readonly operationId: string;
    /** `sha256:<hex>`, equal to this copy's checksum. */
    readonly digest: string;
  } | null;
  /** Why no archive copy counts as verified, when none does (for the refusal). */
  readonly archiveProblem: string | null;
  /** Active operation groups whose claim holds this copy. */
  readonly retainedBy: readonly string[];
}

/** A command as callers give it; the store adds the facts it reads. */
export type CopyCommand =
  | { readonly type: Exclude<PhysicalCopyEventType, 'DELETION_FAILED'> }
  | { readonly type: 'DELETION_FAILED'; readonly error: string };

/** The outcome of one accepted copy event. */
export interface CopyDecision {
  readonly from: PhysicalCopyStatus;
  readonly status: PhysicalCopyStatus;
  readonly context: PhysicalCopyContext;
}

const STATUSES: ReadonlySet<string> = new Set(PHYSICAL_COPY_STATUSES);
const EVENTS: ReadonlySet<string> = new Set(PHYSICAL_COPY_EVENT_TYPES);

function toEvent(command: CopyCommand, facts: CopyFacts): PhysicalCopyEvent {
  const guard: PhysicalCopyGuardFacts = {
    verifiedArchive: facts.verifiedArchive,
    retained: facts.retained,
    removedMembers: facts.removedMembers,
    receipted: facts.receipted,
    leaseExpired: facts.leaseExpired,
  };
  return command.type === 'DELETION_FAILED'
    ? { type: 'DELETION_FAILED', error: command.error }
    : ({ type: command.type, facts: guard } as PhysicalCopyEvent);
}

/**
 * The pure core of every copy status change: applies a command to the stored state under the facts
 * read with it, and returns the next state. Nothing is written. A refusal throws: `UNSAFE` (with
 * the reason) when a safety fact forbids the step — no verified archive, a retention claim, members
 * already removed, no receipt — `CONFLICT` when another deleter still holds the lease, and
 * `INVALID_EVENT` when the status does not take the command at all.
 *
 * @example
 * ```ts
 * const next = decideCopy(state, { type: 'SCHEDULE_DELETION' }, facts);
 * next.status; // 'DELETION_SCHEDULED'
 * ```
 */
export function decideCopy(state: CopyState, command: CopyCommand, facts: CopyFacts): CopyDecision {
  if (!STATUSES.has(state.status)) {
    throw new OpstateError(
      OpstateErrorCode.SNAPSHOT_VERSION,
      `copy status ${JSON.stringify(state.status)} is not one this machine knows`,
    );
  }
  if (typeof command !== 'object' || command === null || !EVENTS.has(command.type)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `unknown copy event ${JSON.stringify((command as { type?: unknown } | null)?.type)}; use one of ${PHYSICAL_COPY_EVENT_TYPES.join(', ')}`,
    );
  }
  if (
    command.type === 'DELETION_FAILED' &&
    (typeof command.error !== 'string' || command.error === '')
  ) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'DELETION_FAILED needs an error text');
  }
  const current = physicalCopyMachine.resolveState({
    value: state.status,
    context: {
      deletionFailureCount: state.deletionFailureCount,
      maxDeletionFailures: state.maxDeletionFailures,
      lastError: state.lastError,
    },
  });
  const [next] = transition(physicalCopyMachine, current, toEvent(command, facts));
  if (next.value === current.value && next.context === current.context) {
    throw refusal(state, command, facts);
  }
  return {
    from: state.status,
    status: next.value as PhysicalCopyStatus,
    context: next.context,
  };
}

/**
 * The event types a copy status takes (before guards).
 *
 * @example
 * ```ts
 * acceptedCopyEvents('DELETION_SCHEDULED'); // ['START_DELETION', 'CANCEL_DELETION']
 * ```
 */
export function acceptedCopyEvents(status: PhysicalCopyStatus): PhysicalCopyEventType[] {
  const node = physicalCopyMachine.states[status];
  return node === undefined ? [] : (node.ownEvents as PhysicalCopyEventType[]);
}

/** Why no archive counts, in one sentence an operator can act on. */
function noArchive(facts: CopyFacts): string {
  return `no verified archive copy of it at a long-term-archive location (${facts.archiveProblem ?? 'none found'}); the source is kept: archive it first, or investigate the archive`;
}

function refusal(state: CopyState, command: CopyCommand, facts: CopyFacts): OpstateError {
  const accepted = acceptedCopyEvents(state.status);
  const details = { status: state.status, event: command.type, facts };
  if (!accepted.includes(command.type)) {
    return new OpstateError(
      OpstateErrorCode.INVALID_EVENT,
      `${command.type} is not accepted for a copy in ${state.status}` +
        (accepted.length > 0 ? ` (accepted: ${accepted.join(', ')})` : ' (it is a final state)'),
      { details },
    );
  }
  const unsafe = (why: string) =>
    new OpstateError(OpstateErrorCode.UNSAFE, `${command.type} refused: ${why}`, { details });
  switch (command.type) {
    case 'SCHEDULE_DELETION':
    case 'START_DELETION':
    case 'REPLAN_DELETION':
      if (!facts.verifiedArchive) return unsafe(noArchive(facts));
      if (facts.retained) {
        return unsafe(
          `an active retention claim holds it (group ${facts.retainedBy.join(', ')}); release the claim first`,
        );
      }
      break;
    case 'CANCEL_DELETION':
      if (facts.removedMembers > 0) {
        return unsafe(
          `${facts.removedMembers} of its members were already removed, so it can never be PRESENT again; re-plan the deletion instead`,
        );
      }
      break;
    case 'DELETION_SUCCEEDED':
      if (!facts.receipted) return unsafe('the deletion has no durable receipt yet');
      break;
    case 'RESUME_DELETION':
      if (!facts.leaseExpired) {
        return new OpstateError(
          OpstateErrorCode.CONFLICT,
          'RESUME_DELETION refused: another deleter still holds the lease',
          { details },
        );
      }
      break;
    default:
      break;
  }
  return new OpstateError(
    OpstateErrorCode.INVALID_EVENT,
    `${command.type} was refused in ${state.status} by the machine's guards`,
    { details },
  );
}
