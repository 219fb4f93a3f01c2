import { OPERATOR } from './actors.ts';
import type { OperationEvent } from './operationMachine.ts';

/** What an operator may do to an operation, from the CLI or the dashboard. */
export type OperatorAction = 'retry' | 'reset' | 'cancel';
export const OPERATOR_ACTIONS: readonly OperatorAction[] = Object.freeze([
  'retry',
  'reset',
  'cancel',
]);

/**
 * The lifecycle event an operator action sends: `RETRY` (FAILED → PENDING with a fresh budget),
 * `RESET` by `operator` (SCHEDULED / IN_PROGRESS → PENDING, a new fenced attempt) or `CANCEL`
 * (→ FAILED). The CLI and the dashboard both send exactly these, so the machine decides alike.
 *
 * @example
 * ```ts
 * await runtime.command(id, operatorEvent('reset', 'worker host replaced'));
 * ```
 */
export function operatorEvent(action: OperatorAction, reason?: string): OperationEvent {
  switch (action) {
    case 'retry':
      return { type: 'RETRY', ...(reason === undefined ? {} : { reason }) };
    case 'reset':
      return { type: 'RESET', by: OPERATOR, reason: reason ?? 'reset by an operator' };
    case 'cancel':
      return { type: 'CANCEL', reason: reason ?? 'cancelled by an operator' };
  }
}
