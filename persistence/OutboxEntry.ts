import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationType, Route } from '../machines/routing.ts';

/** The dispatch message as the outbox stores it (the transport validates it again on publish). */
export interface OutboxPayload {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly operationType: OperationType;
  readonly attempt: number;
}

/** One queued dispatch, committed with the transition that caused it. */
export interface OutboxEntry {
  readonly id: number;
  readonly operationId: string;
  readonly attempt: number;
  readonly queue: string;
  readonly route: Route;
  readonly payload: OutboxPayload;
  readonly createdAt: Date;
  /**
   * The operation has moved on (another attempt, or no longer SCHEDULED): publishing is harmless
   * (the worker fences it) but useless; the relay may just delete the row.
   */
  readonly stale: boolean;
}
