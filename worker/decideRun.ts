import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationEvent, OperationStatus } from '../machines/operationMachine.ts';
import type { LogLine } from '../observe/LogLine.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';

/** How a handler finished: with the output copies it returned, or with what it threw. */
export type HandlerOutcome =
  | { readonly ok: true; readonly outputs: readonly OutputCopy[] }
  | { readonly ok: false; readonly error: unknown };

/** What the worker does once a handler has finished (see `afterRun`). */
export type AfterRun =
  /** Create the output copies and COMPLETE in one transaction, then ack. */
  | { readonly action: 'complete'; readonly outputs: readonly OutputCopy[] }
  /** FAIL the attempt (retried with backoff while the budget lasts when retryable), then ack. */
  | {
      readonly action: 'fail';
      readonly event: Extract<OperationEvent, { type: 'FAIL' }>;
      readonly line: LogLine;
    }
  /** The worker is stopping: stop listing it in the heartbeat and nak it, for another to claim. */
  | { readonly action: 'hand_back' }
  /**
   * Reset or cancelled while it ran (the operation moved on without this worker), or past its
   * deadline (the control plane's deadline path resets it): term.
   */
  | { readonly action: 'let_go'; readonly line: LogLine };

/** How a handler failure is classified: an `OpstateError` says; anything else is retryable. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof OpstateError) return err.retryable;
  if (typeof err === 'object' && err !== null && 'retryable' in err) {
    return (err as { retryable: unknown }).retryable !== false;
  }
  return true;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
const codeOf = (err: unknown) => (err instanceof OpstateError ? err.code : undefined);

/**
 * The worker's decision once a handler has finished, pure. An aborted run (the operation reset or
 * cancelled, the attempt past its deadline, or the worker stopping) never completes or fails,
 * whatever the handler returned: stopping hands it back, otherwise the worker lets go (past its
 * deadline with a WARNING: the deadline path resets the attempt, whose late result is not written). Else a result completes and a throw
 * fails the attempt, retryable unless the error says otherwise (`isRetryable`), with a WARNING
 * line that carries the error as `err`.
 *
 * @example
 * ```ts
 * const next = afterRun({ operation, outcome: { ok: true, outputs }, abort: undefined,
 *   stopping: false, now: clock.now() }); // { action: 'complete', outputs }
 * ```
 */
export function afterRun(input: {
  readonly operation: {
    readonly id: string;
    readonly kind: string;
    readonly attempt: number;
  };
  readonly outcome: HandlerOutcome;
  /** The abort signal's state: undefined while not aborted, else its reason. */
  readonly abort: { readonly reason: unknown } | undefined;
  readonly stopping: boolean;
  readonly now: number;
}): AfterRun {
  const { operation: op, outcome, abort } = input;
  if (abort !== undefined) {
    if (input.stopping) return { action: 'hand_back' };
    if (codeOf(abort.reason) === OpstateErrorCode.DEADLINE_PASSED) {
      return {
        action: 'let_go',
        line: {
          level: 'WARNING',
          message: 'worker let go of an attempt past its deadline; its result is not written',
          fields: {
            operationId: op.id,
            kind: op.kind,
            attempt: op.attempt,
            outcome: outcome.ok ? 'returned' : 'threw',
            reason: messageOf(abort.reason),
          },
        },
      };
    }
    return {
      action: 'let_go',
      line: {
        level: 'INFO',
        message: 'worker let go of an operation that moved on',
        fields: { operationId: op.id, attempt: op.attempt, reason: messageOf(abort.reason) },
      },
    };
  }
  if (outcome.ok) return { action: 'complete', outputs: outcome.outputs };
  const { error } = outcome;
  const retryable = isRetryable(error);
  const code = codeOf(error);
  return {
    action: 'fail',
    event: {
      type: 'FAIL',
      attempt: op.attempt,
      error: { message: messageOf(error).slice(0, 2000), retryable, ...(code ? { code } : {}) },
      at: new Date(input.now).toISOString(),
    },
    // A handler's failure is the stage's problem for an operator to see, retried or not.
    line: {
      level: 'WARNING',
      message: 'operation failed',
      fields: { operationId: op.id, kind: op.kind, attempt: op.attempt, retryable, err: error },
    },
  };
}

/** What a worker does when the store refuses one of its writes (see `onRefusal`). */
export type Refusal = 'retriage' | 'term' | 'fail' | 'raise';

/**
 * How the worker takes a refused write, pure, by phase. A START that lost its compare-and-set
 * (someone moved the operation between the read and the write) is judged again; a write of a
 * superseded attempt, or an event the state no longer takes, is fenced: term the delivery. A
 * completion refused for what the handler returned, be it outputs the kind's contract lacks
 * (`OUTPUT_CONTRACT`) or outputs that are malformed (`BAD_INPUT`: not a copy, a field of the
 * wrong shape, the same copy twice), is the handler's failure: FAIL the attempt for good, since
 * the same handler would return the same again (the error names what is wrong; a retry would only
 * spend the budget and the backoff on it). Any other failure (the database unreachable) is
 * raised, so the delivery stays unsettled and the broker brings it back.
 *
 * @example
 * ```ts
 * onRefusal(err, 'start'); // 'retriage' for a CONFLICT
 * ```
 */
export function onRefusal(err: unknown, phase: 'start' | 'finish'): Refusal {
  const code = codeOf(err);
  if (code === OpstateErrorCode.CONFLICT && phase === 'start') return 'retriage';
  if (
    phase === 'finish' &&
    (code === OpstateErrorCode.OUTPUT_CONTRACT || code === OpstateErrorCode.BAD_INPUT)
  )
    return 'fail';
  if (code === OpstateErrorCode.STALE_ATTEMPT || code === OpstateErrorCode.INVALID_EVENT) {
    return 'term';
  }
  return 'raise';
}

/**
 * The running operations that moved on (reset, cancelled, completed elsewhere, gone), pure: what
 * the worker aborts after a beat, from one read of their rows.
 *
 * @example
 * ```ts
 * for (const m of movedOn(leases, await store.loadMany(ids))) registry.trigger.abort(m);
 * ```
 */
export function movedOn(
  running: Iterable<{ readonly operationId: string; readonly attempt: number }>,
  current: ReadonlyMap<string, { readonly status: OperationStatus; readonly attempt: number }>,
): { operationId: string; attempt: number; reason: string }[] {
  const moved: { operationId: string; attempt: number; reason: string }[] = [];
  for (const lease of running) {
    const now = current.get(lease.operationId);
    if (now !== undefined && now.attempt === lease.attempt && now.status === 'IN_PROGRESS')
      continue;
    moved.push({
      operationId: lease.operationId,
      attempt: lease.attempt,
      reason: `operation moved to ${now?.status ?? 'nowhere'} at attempt ${now?.attempt ?? '?'}`,
    });
  }
  return moved;
}
