import { and, assign, setup } from 'xstate';
import { OPERATOR } from './actors.ts';
import { OperationKind } from './OperationKind.ts';
import { RECOVERY_PATHS, type RecoveryPath } from './recoveryPaths.ts';

/** The five lifecycle states every operation walks, whatever its kind. */
export const OperationStatus = {
  PENDING: 'PENDING',
  SCHEDULED: 'SCHEDULED',
  IN_PROGRESS: 'IN_PROGRESS',
  COMPLETED: 'COMPLETED',
  FAILED: 'FAILED',
} as const;
export type OperationStatus = (typeof OperationStatus)[keyof typeof OperationStatus];
export const OPERATION_STATUSES: readonly OperationStatus[] = Object.freeze(
  Object.values(OperationStatus),
);

/** Who sent a RESET: one of the recovery paths (`RECOVERY_PATHS`), or a person. */
export type ResetBy = RecoveryPath | typeof OPERATOR;
/** Every `ResetBy`, for checks of events from outside and of stored history. */
export const RESET_BY: readonly ResetBy[] = Object.freeze([...RECOVERY_PATHS, OPERATOR]);

/** A failure as the machine records it: JSON primitives only, so it survives jsonb. */
export interface OperationError {
  readonly message: string;
  readonly retryable: boolean;
  readonly code?: string;
}

/**
 * Everything the machine remembers. JSON primitives only (no Date, no Map): the snapshot is
 * stored as jsonb and must round-trip unchanged. Time is an ISO string.
 */
export interface OperationContext {
  readonly kind: OperationKind;
  /** The fencing epoch and dispatch identity: 1 at creation, +1 on every return to PENDING. */
  readonly attempt: number;
  /** Returns to PENDING spent from the current retry budget. */
  readonly retryCount: number;
  readonly maxRetries: number;
  /** Earliest time the scheduler may dispatch again (retry backoff), or null for now. */
  readonly notBefore: string | null;
  readonly lastError: OperationError | null;
  /** The worker that holds the current attempt, while SCHEDULED → IN_PROGRESS. */
  readonly workerId: string | null;
}

/** Optional on every event: the time the host applied it, used for backoff (the machine never reads a clock). */
interface Timed {
  readonly at?: string;
}

/**
 * Events, tagged by `type`. Worker events (`START`, `COMPLETE`, `FAIL`) carry the `attempt` they
 * were dispatched with; the machine ignores one whose attempt is not current (fencing).
 */
export type OperationEvent =
  | ({ readonly type: 'SCHEDULE' } & Timed)
  | ({ readonly type: 'START'; readonly attempt: number; readonly workerId: string } & Timed)
  | ({ readonly type: 'COMPLETE'; readonly attempt: number } & Timed)
  | ({
      readonly type: 'FAIL';
      readonly attempt: number;
      readonly error: OperationError;
      /** Overrides the default exponential backoff for this failure. */
      readonly retryDelayMs?: number;
    } & Timed)
  | ({
      readonly type: 'RESET';
      readonly by: ResetBy;
      readonly reason: string;
      /** When given, the reset applies only if this is still the current attempt. */
      readonly attempt?: number;
    } & Timed)
  | ({ readonly type: 'RETRY'; readonly reason?: string } & Timed)
  | ({ readonly type: 'CANCEL'; readonly reason: string } & Timed);

export type OperationEventType = OperationEvent['type'];
export const OPERATION_EVENT_TYPES: readonly OperationEventType[] = Object.freeze([
  'SCHEDULE',
  'START',
  'COMPLETE',
  'FAIL',
  'RESET',
  'RETRY',
  'CANCEL',
]);

/** Events that come from a worker and are fenced by `attempt`. */
export const WORKER_EVENT_TYPES: ReadonlySet<OperationEventType> = new Set([
  'START',
  'COMPLETE',
  'FAIL',
]);

export interface OperationInput {
  readonly kind: OperationKind;
  readonly maxRetries?: number;
}

/** The seeds' cap: three returns to PENDING, then FAILED. */
export const DEFAULT_MAX_RETRIES = 3;
/** First retry waits this long; each further one doubles, up to the cap. */
export const RETRY_BACKOFF_BASE_MS = 1_000;
export const RETRY_BACKOFF_CAP_MS = 5 * 60_000;

/** The backoff before retry number `retryCount + 1`: base × 2^retryCount, capped. */
export function retryBackoffMs(retryCount: number): number {
  return Math.min(RETRY_BACKOFF_BASE_MS * 2 ** retryCount, RETRY_BACKOFF_CAP_MS);
}

function addMs(iso: string | undefined, ms: number): string | null {
  if (iso === undefined) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : new Date(t + ms).toISOString();
}

function attemptOf(event: OperationEvent): number | undefined {
  return 'attempt' in event ? event.attempt : undefined;
}

interface ParamArgs {
  readonly context: OperationContext;
  readonly event: OperationEvent;
}

function failureParams({ context, event }: ParamArgs): { attempt: number; error: OperationError } {
  const error = event.type === 'FAIL' ? event.error : { message: event.type, retryable: false };
  return { attempt: context.attempt, error };
}

function abortParams({ context, event }: ParamArgs): {
  attempt: number;
  workerId: string | null;
  reason: string;
} {
  const reason =
    event.type === 'RESET'
      ? `reset by ${event.by}: ${event.reason}`
      : event.type === 'CANCEL'
        ? `cancelled: ${event.reason}`
        : event.type;
  return { attempt: context.attempt, workerId: context.workerId, reason };
}

/**
 * The one lifecycle machine, shared by every `OperationKind`:
 * `PENDING → SCHEDULED → IN_PROGRESS → COMPLETED | FAILED`, with RESET and retryable FAIL back to
 * PENDING while the retry budget lasts, RETRY from FAILED and CANCEL from any live state.
 *
 * It has no `after` timers and no invoked actors: XState does not restore timers from a snapshot
 * and re-runs invoked actors on restore. Its effects are named actions (`dispatch`, `abortWork`,
 * `recordFailure`) that the host reads from the pure `transition()` and runs after it persisted
 * the new snapshot. Use `decide()` rather than driving the machine directly.
 *
 * @example
 * ```ts
 * import { initialTransition, transition } from 'xstate';
 * const [s0] = initialTransition(operationMachine, { kind: OperationKind.TRANSFER });
 * const [s1, actions] = transition(operationMachine, s0, { type: 'SCHEDULE' });
 * s1.value; // 'SCHEDULED'; actions[0].type === 'dispatch'
 * ```
 */
export const operationMachine = setup({
  types: {
    context: {} as OperationContext,
    events: {} as OperationEvent,
    input: {} as OperationInput,
  },
  guards: {
    isCurrentAttempt: ({ context, event }) => attemptOf(event) === context.attempt,
    isCurrentOrUnfenced: ({ context, event }) => {
      const attempt = attemptOf(event);
      return attempt === undefined || attempt === context.attempt;
    },
    hasRetryBudget: ({ context }) => context.retryCount < context.maxRetries,
    isRetryableFailure: ({ event }) => event.type === 'FAIL' && event.error.retryable,
  },
  actions: {
    // Effects: recorded by the pure transition, performed by the host after commit.
    dispatch: (_, _params: { attempt: number }) => {},
    abortWork: (_, _params: { attempt: number; workerId: string | null; reason: string }) => {},
    recordFailure: (_, _params: { attempt: number; error: OperationError }) => {},
    // Context updates.
    assignWorker: assign({
      workerId: ({ event }) => (event.type === 'START' ? event.workerId : null),
      notBefore: null,
    }),
    /** Every return to PENDING: a new attempt (fencing epoch) that spends one retry. */
    returnToPending: assign(({ context, event }) => ({
      attempt: context.attempt + 1,
      retryCount: context.retryCount + 1,
      workerId: null,
      notBefore:
        event.type === 'FAIL'
          ? addMs(event.at, event.retryDelayMs ?? retryBackoffMs(context.retryCount))
          : null,
      lastError:
        event.type === 'FAIL'
          ? event.error
          : event.type === 'RESET'
            ? { message: `reset by ${event.by}: ${event.reason}`, retryable: true, code: 'RESET' }
            : context.lastError,
    })),
    recordTerminalError: assign(({ context, event }) => ({
      workerId: null,
      lastError:
        event.type === 'FAIL'
          ? event.error
          : event.type === 'RESET'
            ? {
                message: `reset by ${event.by} with the retry budget spent (${context.retryCount}/${context.maxRetries}): ${event.reason}`,
                retryable: false,
                code: 'RETRIES_EXHAUSTED',
              }
            : event.type === 'CANCEL'
              ? { message: `cancelled: ${event.reason}`, retryable: false, code: 'CANCELLED' }
              : context.lastError,
    })),
    /** Operator RETRY from FAILED: a new attempt with a fresh retry budget. */
    freshBudget: assign(({ context }) => ({
      attempt: context.attempt + 1,
      retryCount: 0,
      workerId: null,
      notBefore: null,
    })),
  },
}).createMachine({
  id: 'operation',
  version: '1',
  initial: OperationStatus.PENDING,
  // The pure transition API builds a throwaway actor per call and runs this factory with no
  // input, so it must tolerate a missing one (the result is discarded in that case).
  context: ({ input }) => ({
    kind: input?.kind ?? OperationKind.RAW_DATA_PACKAGE,
    attempt: 1,
    retryCount: 0,
    maxRetries: input?.maxRetries ?? DEFAULT_MAX_RETRIES,
    notBefore: null,
    lastError: null,
    workerId: null,
  }),
  states: {
    [OperationStatus.PENDING]: {
      on: {
        SCHEDULE: {
          target: OperationStatus.SCHEDULED,
          actions: { type: 'dispatch', params: ({ context }) => ({ attempt: context.attempt }) },
        },
        CANCEL: { target: OperationStatus.FAILED, actions: 'recordTerminalError' },
      },
    },
    [OperationStatus.SCHEDULED]: {
      on: {
        START: {
          guard: 'isCurrentAttempt',
          target: OperationStatus.IN_PROGRESS,
          actions: 'assignWorker',
        },
        RESET: [
          {
            guard: and(['isCurrentOrUnfenced', 'hasRetryBudget']),
            target: OperationStatus.PENDING,
            actions: 'returnToPending',
          },
          {
            guard: 'isCurrentOrUnfenced',
            target: OperationStatus.FAILED,
            actions: 'recordTerminalError',
          },
        ],
        CANCEL: { target: OperationStatus.FAILED, actions: 'recordTerminalError' },
      },
    },
    [OperationStatus.IN_PROGRESS]: {
      on: {
        COMPLETE: {
          guard: 'isCurrentAttempt',
          target: OperationStatus.COMPLETED,
          // A completed operation has no error: an earlier attempt's failure stays in the
          // transitions and the failure breadcrumbs, never as the outcome of a success.
          actions: assign({ workerId: null, notBefore: null, lastError: null }),
        },
        FAIL: [
          {
            guard: and(['isCurrentAttempt', 'isRetryableFailure', 'hasRetryBudget']),
            target: OperationStatus.PENDING,
            actions: [{ type: 'recordFailure', params: failureParams }, 'returnToPending'],
          },
          {
            guard: 'isCurrentAttempt',
            target: OperationStatus.FAILED,
            actions: [{ type: 'recordFailure', params: failureParams }, 'recordTerminalError'],
          },
        ],
        RESET: [
          {
            guard: and(['isCurrentOrUnfenced', 'hasRetryBudget']),
            target: OperationStatus.PENDING,
            actions: [{ type: 'abortWork', params: abortParams }, 'returnToPending'],
          },
          {
            guard: 'isCurrentOrUnfenced',
            target: OperationStatus.FAILED,
            actions: [{ type: 'abortWork', params: abortParams }, 'recordTerminalError'],
          },
        ],
        CANCEL: {
          target: OperationStatus.FAILED,
          actions: [{ type: 'abortWork', params: abortParams }, 'recordTerminalError'],
        },
      },
    },
    [OperationStatus.COMPLETED]: { type: 'final' },
    [OperationStatus.FAILED]: {
      on: {
        RETRY: { target: OperationStatus.PENDING, actions: 'freshBudget' },
      },
    },
  },
});
