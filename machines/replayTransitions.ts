import { initialTransition, transition } from 'xstate';
import { OPERATOR } from './actors.ts';
import type { OperationKind } from './OperationKind.ts';
import {
  type OperationContext,
  type OperationError,
  type OperationEvent,
  OperationStatus,
  operationMachine,
  RESET_BY,
  type ResetBy,
} from './operationMachine.ts';

/** One stored row of an operation's transition history, as the replay needs it. */
export interface StoredTransition {
  readonly id: number;
  /** Null for the creation row. */
  readonly from: OperationStatus | null;
  readonly to: OperationStatus;
  /** The machine event, or `CREATE` for the creation row. */
  readonly event: string;
  /** Who sent it: a worker id, `scheduler`, a recovery path (`RECOVERY_PATHS`), `operator`… */
  readonly by: string;
  /** The attempt the event acted on. */
  readonly attempt: number;
  readonly reason: string | null;
  readonly at: Date;
  /** FAIL only: the failure breadcrumb of that attempt, when one was recorded. */
  readonly error?: OperationError | null;
}

/** A snapshot as the inspector shows it: plain JSON. */
export interface ReplayedSnapshot {
  readonly status: 'active' | 'done';
  readonly value: OperationStatus;
  readonly context: OperationContext;
}

/** The event the machine took for one stored transition, and the snapshot it led to. */
export interface ReplayStep {
  readonly transition: StoredTransition;
  /** `xstate.init` (with the machine's input) for the creation row, else the machine event. */
  readonly event: { readonly type: string } & Record<string, unknown>;
  readonly snapshot: ReplayedSnapshot;
  /**
   * True when the machine, given the rebuilt event, did not reach the stored status (history
   * written by an older machine version, or a row edited by hand): the snapshot then shows the
   * stored status, because the history is the record.
   */
  readonly diverged: boolean;
}

const RESETTERS: ReadonlySet<string> = new Set<ResetBy>(RESET_BY);

/** The machine event a stored row stands for (its payload rebuilt from the row). */
function eventOf(t: StoredTransition): OperationEvent {
  const at = t.at.toISOString();
  switch (t.event) {
    case 'SCHEDULE':
      return { type: 'SCHEDULE', at };
    case 'START':
      return { type: 'START', attempt: t.attempt, workerId: t.by, at };
    case 'COMPLETE':
      return { type: 'COMPLETE', attempt: t.attempt, at };
    case 'FAIL':
      return {
        type: 'FAIL',
        attempt: t.attempt,
        // A retryable failure returns to PENDING (while the budget lasts); without a breadcrumb
        // the stored target says which it was.
        error: t.error ?? {
          message: t.reason ?? 'failed',
          retryable: t.to === OperationStatus.PENDING,
        },
        at,
      };
    case 'RESET': {
      const by = (RESETTERS.has(t.by) ? t.by : OPERATOR) as ResetBy;
      return {
        type: 'RESET',
        by,
        reason: t.reason ?? 'no reason recorded',
        ...(by === OPERATOR ? {} : { attempt: t.attempt }),
        at,
      };
    }
    case 'RETRY':
      return { type: 'RETRY', ...(t.reason === null ? {} : { reason: t.reason }), at };
    default:
      return { type: 'CANCEL', reason: t.reason ?? 'no reason recorded', at };
  }
}

function plain(s: { status: string; value: unknown; context: OperationContext }): ReplayedSnapshot {
  return {
    status: s.status === 'done' ? 'done' : 'active',
    value: s.value as OperationStatus,
    context: s.context,
  };
}

/**
 * Replays an operation's stored transition history through the lifecycle machine, one step per
 * stored row in order: the event the row stands for (who sent it is `transition.by`) and the
 * snapshot the machine reached. The runtime keeps no live actor per operation, so this is how an
 * operation is shown as an actor of the machine (the Stately inspector, `opstate inspect
 * --stately`). The stored status always wins: a step the machine would not take is marked
 * `diverged` and shows the stored status. `start` continues a replay from the snapshot its last
 * step reached (a live stream that has already shown the earlier rows).
 *
 * @example
 * ```ts
 * const steps = replayTransitions({ kind, maxRetries: 3 }, history);
 * steps.map((s) => `${s.event.type} → ${s.snapshot.value}`); // ['xstate.init → PENDING', 'SCHEDULE → SCHEDULED', …]
 * ```
 */
export function replayTransitions(
  operation: { readonly kind: OperationKind; readonly maxRetries: number },
  history: readonly StoredTransition[],
  start?: ReplayedSnapshot,
): ReplayStep[] {
  const input = { kind: operation.kind, maxRetries: operation.maxRetries };
  let [current] = initialTransition(operationMachine, input);
  if (start !== undefined) {
    current = operationMachine.resolveState({ value: start.value, context: start.context });
  }
  const steps: ReplayStep[] = [];
  for (const t of history) {
    if (t.from === null) {
      [current] = initialTransition(operationMachine, input);
      steps.push({
        transition: t,
        event: { type: 'xstate.init', input, at: t.at.toISOString() },
        snapshot: plain(current),
        diverged: current.value !== t.to,
      });
      continue;
    }
    const event = eventOf(t);
    let [next] = transition(operationMachine, current, event);
    const diverged = next.value !== t.to;
    if (diverged) next = operationMachine.resolveState({ value: t.to, context: next.context });
    steps.push({ transition: t, event: { ...event }, snapshot: plain(next), diverged });
    current = next;
  }
  return steps;
}
