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
  /** IN_PROGRESS at this attempt elsewhere: reset by the broker path unless a live worker holds it. */
  | { readonly action: 'reclaim' };

export interface TriageInput {
  readonly message: DispatchMessage;
  readonly stored: OperationRecord;
  /** Whether this worker has a handler for the stored operation's kind. */
  readonly handled: boolean;
  /** The attempt this process runs the operation under, if it runs it. */
  readonly localAttempt: number | undefined;
}

/**
 * The worker's decision about one delivery, pure: the stored operation, the message, and what
 * this process runs in, the action out. The worker does the I/O (load before, settle after).
 *
 * @example
 * ```ts
 * triageDelivery({ message, stored, handled: true, localAttempt: undefined }); // { action: 'run' }
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
    return localAttempt === stored.attempt ? { action: 'running_here' } : { action: 'reclaim' };
  }
  return { action: 'term', reason: `the operation is ${stored.status}` };
}
