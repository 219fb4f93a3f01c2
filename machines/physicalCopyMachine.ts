import { assign, setup } from 'xstate';

/**
 * Deletion is a state machine on the copy, not an operation: it runs in the destroy direction and
 * never gets an operation row of its own.
 */
export const PhysicalCopyStatus = {
  PRESENT: 'PRESENT',
  DELETION_SCHEDULED: 'DELETION_SCHEDULED',
  DELETION_IN_PROGRESS: 'DELETION_IN_PROGRESS',
  DELETED: 'DELETED',
  DELETION_FAILED: 'DELETION_FAILED',
} as const;
export type PhysicalCopyStatus = (typeof PhysicalCopyStatus)[keyof typeof PhysicalCopyStatus];
export const PHYSICAL_COPY_STATUSES: readonly PhysicalCopyStatus[] = Object.freeze(
  Object.values(PhysicalCopyStatus),
);

export interface PhysicalCopyContext {
  /** Failed deletion attempts so far (the counter the seeds' #90 asked for). */
  readonly deletionFailureCount: number;
  readonly maxDeletionFailures: number;
  readonly lastError: string | null;
}

/**
 * The facts a deletion needs, passed in by the caller who read them in the same transaction.
 * The machine refuses to schedule a deletion unless another verified copy exists and no active
 * retention claim holds this one.
 */
export type PhysicalCopyEvent =
  | {
      readonly type: 'SCHEDULE_DELETION';
      /** A verified copy of the same artifact exists elsewhere (for a source: the LTA archive). */
      readonly verifiedCopyElsewhere: boolean;
      /** An active retention claim (a staging job) holds this copy. */
      readonly retained: boolean;
    }
  | { readonly type: 'START_DELETION' }
  | { readonly type: 'DELETION_SUCCEEDED' }
  | { readonly type: 'DELETION_FAILED'; readonly error: string }
  | { readonly type: 'RETRY_DELETION' }
  /** Withdraw a deletion that has not started (a claim appeared, an operator changed their mind). */
  | { readonly type: 'CANCEL_DELETION' };

export interface PhysicalCopyInput {
  readonly maxDeletionFailures?: number;
}

export const DEFAULT_MAX_DELETION_FAILURES = 3;

/**
 * `PRESENT → DELETION_SCHEDULED → DELETION_IN_PROGRESS → DELETED`, with `DELETION_FAILED` counting
 * failures; a failed deletion may be retried while under the cap, and a deletion that has not
 * started may be withdrawn back to PRESENT.
 *
 * @example
 * ```ts
 * const [s0] = initialTransition(physicalCopyMachine, {});
 * const [s1] = transition(physicalCopyMachine, s0,
 *   { type: 'SCHEDULE_DELETION', verifiedCopyElsewhere: true, retained: false });
 * s1.value; // 'DELETION_SCHEDULED'
 * ```
 */
export const physicalCopyMachine = setup({
  types: {
    context: {} as PhysicalCopyContext,
    events: {} as PhysicalCopyEvent,
    input: {} as PhysicalCopyInput,
  },
  guards: {
    safeToDelete: ({ event }) =>
      event.type === 'SCHEDULE_DELETION' && event.verifiedCopyElsewhere && !event.retained,
    underFailureCap: ({ context }) => context.deletionFailureCount < context.maxDeletionFailures,
  },
}).createMachine({
  id: 'physical_copy',
  version: '1',
  initial: PhysicalCopyStatus.PRESENT,
  context: ({ input }) => ({
    deletionFailureCount: 0,
    maxDeletionFailures: input?.maxDeletionFailures ?? DEFAULT_MAX_DELETION_FAILURES,
    lastError: null,
  }),
  states: {
    [PhysicalCopyStatus.PRESENT]: {
      on: {
        SCHEDULE_DELETION: { guard: 'safeToDelete', target: PhysicalCopyStatus.DELETION_SCHEDULED },
      },
    },
    [PhysicalCopyStatus.DELETION_SCHEDULED]: {
      on: {
        START_DELETION: PhysicalCopyStatus.DELETION_IN_PROGRESS,
        CANCEL_DELETION: PhysicalCopyStatus.PRESENT,
      },
    },
    [PhysicalCopyStatus.DELETION_IN_PROGRESS]: {
      on: {
        DELETION_SUCCEEDED: PhysicalCopyStatus.DELETED,
        DELETION_FAILED: {
          target: PhysicalCopyStatus.DELETION_FAILED,
          actions: assign({
            deletionFailureCount: ({ context }) => context.deletionFailureCount + 1,
            lastError: ({ event }) => event.error,
          }),
        },
      },
    },
    [PhysicalCopyStatus.DELETION_FAILED]: {
      on: {
        RETRY_DELETION: { guard: 'underFailureCap', target: PhysicalCopyStatus.DELETION_SCHEDULED },
        CANCEL_DELETION: PhysicalCopyStatus.PRESENT,
      },
    },
    [PhysicalCopyStatus.DELETED]: { type: 'final' },
  },
});
