import { OperationKind } from './OperationKind.ts';

/**
 * The routing axis, kept apart from `OperationKind` on purpose: queue names are built from routing
 * alone and are a frozen contract. Renaming a value here would silently create a new queue and
 * orphan the messages waiting in the old one, so the values are pinned by a test.
 */
export enum OperationType {
  RAW_DATA_PACKAGE_CREATION = 'raw_data_package_creation',
  DATA_TRANSFER_PACKAGE_CREATION = 'data_transfer_package_creation',
  DATA_TRANSFER = 'data_transfer',
  DATA_TRANSFER_UNPACKING = 'data_transfer_unpacking',
  LONG_TERM_ARCHIVE_TRANSFER = 'long_term_archive_transfer',
  STAGING = 'staging',
}

/** What a storage location is for. Together with `OperationType` it picks the queue. */
export enum LocationType {
  SOURCE = 'source',
  BUFFER = 'buffer',
  LONG_TERM_ARCHIVE = 'long_term_archive',
  PROCESSING = 'processing',
}

/** Which operation types the workers at each location type serve (frozen). */
export const QUEUE_OPERATIONS_BY_LOCATION_TYPE: Readonly<
  Record<LocationType, readonly OperationType[]>
> = Object.freeze({
  [LocationType.SOURCE]: Object.freeze([
    OperationType.RAW_DATA_PACKAGE_CREATION,
    OperationType.DATA_TRANSFER_PACKAGE_CREATION,
    OperationType.DATA_TRANSFER,
  ]),
  [LocationType.BUFFER]: Object.freeze([
    OperationType.DATA_TRANSFER,
    OperationType.DATA_TRANSFER_UNPACKING,
    OperationType.DATA_TRANSFER_PACKAGE_CREATION,
  ]),
  [LocationType.LONG_TERM_ARCHIVE]: Object.freeze([OperationType.LONG_TERM_ARCHIVE_TRANSFER]),
  [LocationType.PROCESSING]: Object.freeze([OperationType.STAGING]),
});

/**
 * The operation type each kind is dispatched as by default. This is the one place where the two
 * axes meet, and it maps identity to routing, never the other way round.
 */
export const DEFAULT_OPERATION_TYPE: Readonly<Record<OperationKind, OperationType>> = Object.freeze(
  {
    [OperationKind.RAW_DATA_PACKAGE]: OperationType.RAW_DATA_PACKAGE_CREATION,
    [OperationKind.DATA_TRANSFER_PACKAGE]: OperationType.DATA_TRANSFER_PACKAGE_CREATION,
    [OperationKind.TRANSFER]: OperationType.DATA_TRANSFER,
    [OperationKind.UNPACK]: OperationType.DATA_TRANSFER_UNPACKING,
    [OperationKind.LONG_TERM_ARCHIVE]: OperationType.LONG_TERM_ARCHIVE_TRANSFER,
    [OperationKind.STAGING]: OperationType.STAGING,
  },
);

/** The location type each kind runs at by default (where its worker sits). */
export const DEFAULT_LOCATION_TYPE: Readonly<Record<OperationKind, LocationType>> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: LocationType.SOURCE,
  [OperationKind.DATA_TRANSFER_PACKAGE]: LocationType.SOURCE,
  [OperationKind.TRANSFER]: LocationType.SOURCE,
  [OperationKind.UNPACK]: LocationType.BUFFER,
  [OperationKind.LONG_TERM_ARCHIVE]: LocationType.LONG_TERM_ARCHIVE,
  [OperationKind.STAGING]: LocationType.PROCESSING,
});

/** A routing key: where a dispatch goes. Carries no `OperationKind` on purpose. */
export interface Route {
  readonly operationType: OperationType;
  readonly locationType: LocationType;
}

const OPERATION_TYPES = new Set<string>(Object.values(OperationType));
const LOCATION_TYPES = new Set<string>(Object.values(LocationType));

export function isOperationType(value: unknown): value is OperationType {
  return typeof value === 'string' && OPERATION_TYPES.has(value);
}

export function isLocationType(value: unknown): value is LocationType {
  return typeof value === 'string' && LOCATION_TYPES.has(value);
}

/**
 * The frozen queue name of a route: `<location type>_<operation type>`. The same string names the
 * durable consumer; the NATS subject is derived from it (`queueSubject`).
 *
 * @example
 * ```ts
 * queueName({ locationType: LocationType.LONG_TERM_ARCHIVE,
 *             operationType: OperationType.LONG_TERM_ARCHIVE_TRANSFER });
 * // 'long_term_archive_long_term_archive_transfer'
 * ```
 */
export function queueName(route: Route): string {
  return `${route.locationType}_${route.operationType}`;
}

/**
 * The subject a route's dispatches are published on, under a prefix that names the deployment
 * (tests use a unique prefix per run): `<prefix>.dispatch.<location type>.<operation type>`.
 */
export function queueSubject(prefix: string, route: Route): string {
  return `${prefix}.dispatch.${route.locationType}.${route.operationType}`;
}

/** The route a kind takes when the caller names no other. */
export function defaultRoute(kind: OperationKind): Route {
  return {
    operationType: DEFAULT_OPERATION_TYPE[kind],
    locationType: DEFAULT_LOCATION_TYPE[kind],
  };
}

/** Every route the frozen table allows, for workers that discover their queues at start. */
export function allRoutes(): Route[] {
  return (Object.keys(QUEUE_OPERATIONS_BY_LOCATION_TYPE) as LocationType[]).flatMap(
    (locationType) =>
      QUEUE_OPERATIONS_BY_LOCATION_TYPE[locationType].map((operationType) => ({
        operationType,
        locationType,
      })),
  );
}
