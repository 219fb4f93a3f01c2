import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';

/**
 * How many operations there are per kind × status, every kind and status present (zeros
 * included): what `selectStatusCounts` reads from the tally the database keeps.
 *
 * @example
 * ```ts
 * const counts: StatusCounts = await selectStatusCounts(database);
 * counts.long_term_archive.IN_PROGRESS; // 2
 * ```
 */
export type StatusCounts = Record<OperationKind, Record<OperationStatus, number>>;

/** A kind and status whose tallied count did not match the rows stored. */
export interface TallyDrift {
  readonly kind: string;
  readonly status: string;
  /** What the tally said. */
  readonly tallied: number;
  /** What is stored. */
  readonly stored: number;
}
