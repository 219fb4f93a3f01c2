/**
 * The identity axis: what an operation *is*. Values equal the frozen strings already stored in
 * breadcrumbs and subtype discriminators, so they must never change.
 *
 * Recovery handlers, circuit breakers, failure breadcrumbs and the joined-table discriminator all
 * take a member of this enum, never a literal. Routing (which queue a dispatch goes to) is a
 * separate axis: see `routing.ts`.
 *
 * @example
 * ```ts
 * const handlers: Record<OperationKind, Handler> = { ... }; // must name all six kinds
 * ```
 */
export enum OperationKind {
  /** Packaging: raw data files → a raw data package. */
  RAW_DATA_PACKAGE = 'raw_data_package',
  /** Bundling: raw data packages → a data transfer package. */
  DATA_TRANSFER_PACKAGE = 'data_transfer_package',
  TRANSFER = 'transfer',
  UNPACK = 'unpack',
  LONG_TERM_ARCHIVE = 'long_term_archive',
  STAGING = 'staging',
}

/** Every kind, in pipeline order. */
export const OPERATION_KINDS: readonly OperationKind[] = Object.freeze([
  OperationKind.RAW_DATA_PACKAGE,
  OperationKind.DATA_TRANSFER_PACKAGE,
  OperationKind.TRANSFER,
  OperationKind.UNPACK,
  OperationKind.LONG_TERM_ARCHIVE,
  OperationKind.STAGING,
]);

const KIND_VALUES = new Set<string>(OPERATION_KINDS);

/**
 * Narrows a string from the outside world (a message, a CLI flag, a row) to an `OperationKind`.
 *
 * @example
 * ```ts
 * if (isOperationKind(flag)) startWorker({ kinds: [flag] });
 * ```
 */
export function isOperationKind(value: unknown): value is OperationKind {
  return typeof value === 'string' && KIND_VALUES.has(value);
}
