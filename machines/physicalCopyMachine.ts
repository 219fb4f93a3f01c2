import { and, assign, setup } from 'xstate';

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
  /** Interruptions and failures of the deletion so far (the one counter, as `retryCount` is for operations). */
  readonly deletionFailureCount: number;
  /** Interruptions a deletion may take before it ends DELETION_FAILED for an operator. */
  readonly maxDeletionFailures: number;
  readonly lastError: string | null;
}

/**
 * What the store read about a copy in the same snapshot as the write it guards. The machine's
 * guards decide on these alone; the store re-reads them in the statement that writes, so a fact
 * that changed in between makes the write miss instead of landing on a stale decision.
 */
export interface PhysicalCopyGuardFacts {
  /** A live, VERIFIED archive copy of the same artifact with the same digest is at a long-term-archive location. */
  readonly verifiedArchive: boolean;
  /** An active retention claim (an operation group) holds this copy. */
  readonly retained: boolean;
  /** Members of this copy some deletion plan already removed (a partly deleted copy is never PRESENT again). */
  readonly removedMembers: number;
  /** The current deletion plan has its durable receipt. */
  readonly receipted: boolean;
  /** The current deletion's lease has run out (its deleter stopped renewing it). */
  readonly leaseExpired: boolean;
}

export type PhysicalCopyEvent =
  /** Decide to delete: only with a verified archive elsewhere and no retention claim. */
  | { readonly type: 'SCHEDULE_DELETION'; readonly facts: PhysicalCopyGuardFacts }
  /** A deleter takes a scheduled deletion and writes its plan: the same facts must still hold. */
  | { readonly type: 'START_DELETION'; readonly facts: PhysicalCopyGuardFacts }
  /** Another deleter takes over a deletion whose lease ran out: counts one interruption. */
  | { readonly type: 'RESUME_DELETION'; readonly facts: PhysicalCopyGuardFacts }
  /** Every planned member is accounted for and the receipt is durable. */
  | { readonly type: 'DELETION_SUCCEEDED'; readonly facts: PhysicalCopyGuardFacts }
  /** A member was kept (it failed revalidation) or the run could not go on. */
  | { readonly type: 'DELETION_FAILED'; readonly error: string }
  /** An operator re-plans a failed deletion after review, with a fresh budget. */
  | { readonly type: 'REPLAN_DELETION'; readonly facts: PhysicalCopyGuardFacts }
  /** Withdraw a deletion that removed nothing (a claim appeared, an operator changed their mind). */
  | { readonly type: 'CANCEL_DELETION'; readonly facts: PhysicalCopyGuardFacts };

export type PhysicalCopyEventType = PhysicalCopyEvent['type'];

export const PHYSICAL_COPY_EVENT_TYPES: readonly PhysicalCopyEventType[] = Object.freeze([
  'SCHEDULE_DELETION',
  'START_DELETION',
  'RESUME_DELETION',
  'DELETION_SUCCEEDED',
  'DELETION_FAILED',
  'REPLAN_DELETION',
  'CANCEL_DELETION',
]);

export interface PhysicalCopyInput {
  readonly maxDeletionFailures?: number;
}

export const DEFAULT_MAX_DELETION_FAILURES = 3;

const factsOf = (event: PhysicalCopyEvent): PhysicalCopyGuardFacts | undefined =>
  'facts' in event ? event.facts : undefined;

/**
 * `PRESENT → DELETION_SCHEDULED → DELETION_IN_PROGRESS → DELETED`, with `DELETION_FAILED` for a
 * deletion that kept a member or was interrupted too often. Every step towards deletion is guarded
 * by facts the store reads in the same snapshot as its write: a verified archive copy elsewhere,
 * no retention claim. A deletion whose deleter died is resumed by another (one interruption
 * counted); at the cap it fails for an operator, who may re-plan it. A copy that lost any member
 * never returns to PRESENT.
 *
 * @example
 * ```ts
 * const facts = { verifiedArchive: true, retained: false, removedMembers: 0, receipted: false, leaseExpired: false };
 * const [s0] = initialTransition(physicalCopyMachine, {});
 * const [s1] = transition(physicalCopyMachine, s0, { type: 'SCHEDULE_DELETION', facts });
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
      factsOf(event)?.verifiedArchive === true && factsOf(event)?.retained === false,
    leaseExpired: ({ event }) => factsOf(event)?.leaseExpired === true,
    underFailureCap: ({ context }) => context.deletionFailureCount < context.maxDeletionFailures,
    receipted: ({ event }) => factsOf(event)?.receipted === true,
    nothingRemoved: ({ event }) => factsOf(event)?.removedMembers === 0,
  },
  actions: {
    countInterruption: assign({
      deletionFailureCount: ({ context }) => context.deletionFailureCount + 1,
      lastError: ({ context }) =>
        `deletion interrupted (its deleter's lease ran out); interruption ${context.deletionFailureCount + 1} of ${context.maxDeletionFailures}`,
    }),
    countFailure: assign({
      deletionFailureCount: ({ context }) => context.deletionFailureCount + 1,
      lastError: ({ event }) => (event.type === 'DELETION_FAILED' ? event.error : null),
    }),
    freshBudget: assign({ deletionFailureCount: 0, lastError: null }),
  },
}).createMachine({
  id: 'physical_copy',
  version: '2',
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
        START_DELETION: {
          guard: 'safeToDelete',
          target: PhysicalCopyStatus.DELETION_IN_PROGRESS,
        },
        CANCEL_DELETION: PhysicalCopyStatus.PRESENT,
      },
    },
    [PhysicalCopyStatus.DELETION_IN_PROGRESS]: {
      on: {
        RESUME_DELETION: [
          { guard: and(['leaseExpired', 'underFailureCap']), actions: 'countInterruption' },
          {
            guard: 'leaseExpired',
            target: PhysicalCopyStatus.DELETION_FAILED,
            actions: 'countInterruption',
          },
        ],
        DELETION_SUCCEEDED: { guard: 'receipted', target: PhysicalCopyStatus.DELETED },
        DELETION_FAILED: {
          target: PhysicalCopyStatus.DELETION_FAILED,
          actions: 'countFailure',
        },
      },
    },
    [PhysicalCopyStatus.DELETION_FAILED]: {
      on: {
        REPLAN_DELETION: {
          guard: 'safeToDelete',
          target: PhysicalCopyStatus.DELETION_SCHEDULED,
          actions: 'freshBudget',
        },
        CANCEL_DELETION: { guard: 'nothingRemoved', target: PhysicalCopyStatus.PRESENT },
      },
    },
    [PhysicalCopyStatus.DELETED]: { type: 'final' },
  },
});
