import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationEvent, OperationStatus } from '../machines/operationMachine.ts';
import type { LogLine } from '../observe/LogLine.ts';

/** The RESET a recovery path sends. */
export type ResetEvent = Extract<OperationEvent, { type: 'RESET' }>;

/**
 * A reset a recovery pass decided on: the event to apply (fenced on the attempt that was judged
 * dead, so it is refused if the operation moved on meanwhile) and what to log once it is written.
 *
 * @example
 * ```ts
 * for (const r of planMonitorResets(input)) if (await apply(r)) writeLines(logger, [r.line]);
 * ```
 */
export interface PlannedReset {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly event: ResetEvent;
  readonly line: LogLine;
}
