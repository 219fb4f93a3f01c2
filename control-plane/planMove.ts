import type { OperationStatus } from '../machines/operationMachine.ts';
import { isSiteRoute, type Route } from '../machines/routing.ts';
import type { DispatchMessage } from '../transport/Transport.ts';

/** An operation as the legacy drain sees it: where it routes now, and where it stands. */
export interface MovingOperation {
  readonly route: Route;
  readonly status: OperationStatus;
  readonly attempt: number;
}

/** What the legacy drain does with one dispatch found on a legacy queue. */
export type Move =
  /** Publish it again on the operation's site route, then ack the legacy copy. */
  | { readonly type: 'move'; readonly route: Route }
  /** Its operation has no site route: leave it for a worker started without a site. */
  | { readonly type: 'leave' }
  /** Stale or of no operation: a worker would term it too. */
  | { readonly type: 'drop'; readonly reason: string };

/**
 * The fate of a dispatch queued under a legacy name (`<location type>_<operation type>`): an
 * operation still waiting on that attempt (SCHEDULED, or IN_PROGRESS where a redelivery may
 * recover it) moves to its site route; a stale attempt or an operation that is gone is dropped, as
 * the worker's triage would term it; one without a site route stays.
 *
 * @example
 * ```ts
 * planMove(message, records.get(message.operationId)); // { type: 'move', route }
 * ```
 */
export function planMove(message: DispatchMessage, current: MovingOperation | undefined): Move {
  if (current === undefined) return { type: 'drop', reason: 'no such operation' };
  if (current.attempt !== message.attempt) {
    return { type: 'drop', reason: `stale attempt ${message.attempt} (now ${current.attempt})` };
  }
  if (current.status !== 'SCHEDULED' && current.status !== 'IN_PROGRESS') {
    return { type: 'drop', reason: `the operation is ${current.status}` };
  }
  return isSiteRoute(current.route) ? { type: 'move', route: current.route } : { type: 'leave' };
}
