import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';

/**
 * An operation a worker holds, as the heartbeat monitor sees it (`OperationStore.listInProgress`).
 *
 * @example
 * ```ts
 * const held: InProgressOperation[] = await store.listInProgress();
 * ```
 */
export interface InProgressOperation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  readonly startedAt: Date | null;
  readonly workerId: string | null;
}

/**
 * SCHEDULED or IN_PROGRESS since before a time, as the reconciler sees it
 * (`OperationStore.listActiveOlderThan`).
 *
 * @example
 * ```ts
 * const suspects: ActiveOperation[] = await store.listActiveOlderThan(new Date(clock.now() - floorMs));
 * ```
 */
export interface ActiveOperation extends InProgressOperation {
  readonly status: OperationStatus;
  readonly scheduledAt: Date | null;
  /** started_at when IN_PROGRESS, else scheduled_at: what the floor is measured from. */
  readonly since: Date;
  /** Where the row stands in the oldest-first order, exactly: the next page starts after it. */
  readonly position: ActivePosition;
}

/** A row's place in `listActiveOlderThan`'s order: its `since` to the microsecond, and its id. */
export interface ActivePosition {
  /** `since` as Postgres prints it (a Date would drop the microseconds). */
  readonly since: string;
  readonly id: string;
}

/** Which page of `listActiveOlderThan` to read. */
export interface ActivePage {
  /** Only rows after this position (the last row of the page before). */
  readonly after?: ActivePosition;
  /** Only operations in this status (default: SCHEDULED and IN_PROGRESS). */
  readonly status?: 'SCHEDULED' | 'IN_PROGRESS';
}

/**
 * An IN_PROGRESS attempt as the deadline path judges it (`OperationStore.listPastDeadline`).
 *
 * @example
 * ```ts
 * const late: RunningAttempt[] = await store.listPastDeadline(new Date(clock.now()), timing.deadlines);
 * ```
 */
export interface RunningAttempt {
  readonly id: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  /** Its START's time, as the transition recorded it. */
  readonly startedAt: Date;
  /** The worker the START recorded. */
  readonly workerId: string | null;
  /** The operation's own deadline (ms) from submit; null: its kind's. */
  readonly deadlineMs: number | null;
}
