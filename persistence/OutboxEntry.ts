import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationType, Route } from '../machines/routing.ts';

/** The dispatch message of a SCHEDULE transition (the transport validates it again on publish). */
export interface OutboxPayload {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly operationType: OperationType;
  readonly attempt: number;
}

/** A SCHEDULE transition as the relay first reads it: enough to pass over what went out. */
export interface ScheduledTransition {
  /** The transition's id: the relay's cursor passes dispatches in this order. */
  readonly id: number;
  readonly operationId: string;
  readonly attempt: number;
  /** When it was written. */
  readonly at: Date;
}

/**
 * One committed dispatch as the relay reads it: a SCHEDULE transition of the history, with the
 * queue and message that follow from its operation.
 */
export interface OutboxEntry {
  /** The SCHEDULE transition's id: the relay's cursor passes dispatches in this order. */
  readonly id: number;
  readonly operationId: string;
  readonly attempt: number;
  readonly route: Route;
  readonly payload: OutboxPayload;
  /** When the transition was written. */
  readonly createdAt: Date;
  /**
   * The operation has moved on (another attempt, or no longer SCHEDULED): publishing is harmless
   * (the worker fences it) but useless; the relay passes it over.
   */
  readonly stale: boolean;
}
