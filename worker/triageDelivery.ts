import type { ResetEvent } from '../loops/PlannedReset.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import type { OperationRecord } from '../persistence/OperationRecord.ts';
import type { DispatchMessage } from '../transport/Transport.ts';

/** What a worker does with one delivery, decided from what it knows (see `triageDelivery`). */
export type Triage =
  /** The stored operation has another kind, or this worker has no handler for it: term, warn. */
  | { readonly action: 'drop'; readonly reason: string }
  /** Already COMPLETED: ack (an early return, nothing re-run). */
  | { readonly action: 'ack' }
  /** The message's attempt is not current (fenced) or the operation is PENDING/FAILED: term. */
  | { readonly action: 'term'; readonly reason: string }
  /** SCHEDULED at the message's attempt: hold it, cover it by a heartbeat, START, run. */
  | { readonly action: 'run' }
  /** IN_PROGRESS here, under this attempt: a redelivery of what this process runs: term, warn. */
  | { readonly action: 'running_here' }
  /**
   * IN_PROGRESS at this attempt elsewhere, and whether a live worker holds it is not known yet:
   * read the heartbeats and triage again with `holderAlive`.
   */
  | { readonly action: 'check_holder' }
  /** IN_PROGRESS at this attempt and a live worker holds it (the monitor watches it): term. */
  | { readonly action: 'held_elsewhere' }
  /**
   * IN_PROGRESS at this attempt and no live worker holds it (a broker redelivery after its holder
   * died): RESET by `broker`, fenced on the version read, so the next attempt is dispatched; term.
   */
  | { readonly action: 'reclaim'; readonly event: ResetEvent };

export interface TriageInput {
  readonly message: DispatchMessage;
  readonly stored: OperationRecord;
  /** Whether this worker has a handler for the stored operation's kind. */
  readonly handled: boolean;
  /** The attempt this process runs the operation under, if it runs it. */
  readonly localAttempt: number | undefined;
  /** Whether a live worker's heartbeat holds the stored attempt; undefined until it was read. */
  readonly holderAlive?: boolean;
  /** How many times the broker has delivered this message (1 = the first time). */
  readonly deliveryCount: number;
  readonly now: number;
}

/**
 * The worker's decision about one delivery, pure: the stored operation, the message, what this
 * process runs and (once read) whether a live worker holds the operation; the action out. The
 * worker does the I/O (load before, heartbeats when asked, settle after).
 *
 * @example
 * ```ts
 * triageDelivery({ message, stored, handled: true, localAttempt: undefined,
 *   deliveryCount: 1, now: clock.now() }); // { action: 'run' }
 * ```
 */
export function triageDelivery(input: TriageInput): Triage {
  const { message, stored, handled, localAttempt } = input;
  if (stored.kind !== message.kind || !handled) {
    return {
      action: 'drop',
      reason:
        stored.kind !== message.kind
          ? `the dispatch says ${message.kind}, the operation is ${stored.kind}`
          : `this worker has no handler for ${stored.kind}`,
    };
  }
  if (stored.status === OperationStatus.COMPLETED) return { action: 'ack' };
  if (message.attempt !== stored.attempt) {
    return { action: 'term', reason: `stale dispatch: attempt ${stored.attempt} is current` };
  }
  if (stored.status === OperationStatus.SCHEDULED) return { action: 'run' };
  if (stored.status === OperationStatus.IN_PROGRESS) {
    if (localAttempt === stored.attempt) return { action: 'running_here' };
    if (input.holderAlive === undefined) return { action: 'check_holder' };
    if (input.holderAlive) return { action: 'held_elsewhere' };
    return {
      action: 'reclaim',
      event: {
        type: 'RESET',
        by: 'broker',
        reason: `redelivered (delivery ${input.deliveryCount}) with no live holder`,
        attempt: stored.attempt,
        at: new Date(input.now).toISOString(),
      },
    };
  }
  return { action: 'term', reason: `the operation is ${stored.status}` };
}
