import { describeValue } from './describeValue.ts';
import { OperationKind } from './OperationKind.ts';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';

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

/**
 * How often a worker that discovers its queues looks again for locations registered since, and
 * the control plane creates the consumers of their queues (5 s), on the runtime's clock: a
 * location registered while they run is read within one interval. Each look is one read of the
 * registered locations; the leader also creates a new queue's consumer as soon as it dispatches
 * work to it.
 *
 * @example
 * ```ts
 * runtime.startWorker({ site: 'cologne', kinds, handlers, discoveryIntervalMs: DEFAULT_DISCOVERY_INTERVAL_MS });
 * ```
 */
export const DEFAULT_DISCOVERY_INTERVAL_MS = 5_000;

/** Every operation type, in declaration order. */
export const OPERATION_TYPES_IN_USE: readonly OperationType[] = Object.freeze(
  Object.values(OperationType),
);

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

/**
 * A routing key: where a dispatch goes. Carries no `OperationKind` on purpose. A site route names
 * the site and the location whose storage the handler must reach (`site` and `location` both set,
 * `locationType` that location's type): only the workers that can reach that storage read it. A
 * route without them is a legacy route (`<location type>_<operation type>`), the name every
 * dispatch had before site routes; it is kept so that dispatches queued under it are drained.
 */
export interface Route {
  readonly operationType: OperationType;
  readonly locationType: LocationType;
  /** The site of the routed location (site routes only). */
  readonly site?: string;
  /** The name of the routed location at its site (site routes only). */
  readonly location?: string;
}

/**
 * A route that names its site and location.
 *
 * @example
 * ```ts
 * const r: SiteRoute = siteRoute(OperationType.STAGING, { site: 's', name: 'proc', locationType: LocationType.PROCESSING });
 * ```
 */
export interface SiteRoute extends Route {
  readonly site: string;
  readonly location: string;
}

/**
 * Whether a route names its site and location (else it is a legacy route).
 *
 * @example
 * ```ts
 * isSiteRoute(defaultRoute(OperationKind.TRANSFER)); // false: the legacy source_data_transfer
 * ```
 */
export function isSiteRoute(route: Route): route is SiteRoute {
  return route.site !== undefined && route.location !== undefined;
}

/**
 * Which subtype field names the location an operation routes on: the one whose storage its
 * handler must reach. The destination for transfer, long-term archive and staging (the processing
 * area it stages into); the location for packaging, bundling and unpacking.
 *
 * @example
 * ```ts
 * fields[ROUTED_LOCATION_FIELD[OperationKind.TRANSFER]]; // the destinationLocationId
 * ```
 */
export const ROUTED_LOCATION_FIELD: Readonly<
  Record<OperationKind, 'destinationLocationId' | 'locationId'>
> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: 'locationId',
  [OperationKind.DATA_TRANSFER_PACKAGE]: 'locationId',
  [OperationKind.TRANSFER]: 'destinationLocationId',
  [OperationKind.UNPACK]: 'locationId',
  [OperationKind.LONG_TERM_ARCHIVE]: 'destinationLocationId',
  [OperationKind.STAGING]: 'destinationLocationId',
});

/**
 * A registered storage location as routing sees it.
 *
 * @example
 * ```ts
 * const at: RoutedLocation = { site: 'cologne', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE };
 * ```
 */
export interface RoutedLocation {
  readonly site: string;
  readonly name: string;
  readonly locationType: LocationType;
}

/**
 * What a site or location name may hold: 1 to 64 letters, digits and `-`, starting with a letter
 * or digit. It becomes a NATS subject token and a part of a consumer name, so no `.`, `*`, `>` or
 * whitespace; and no `_`, which separates the parts of a queue name (so one name never stands for
 * two routes).
 */
export const ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;

/**
 * Why a site or location name cannot route, or undefined when it can.
 *
 * @example
 * ```ts
 * routeNameProblem('site', 'cologne'); // undefined
 * routeNameProblem('site', 'köln.1'); // 'site "köln.1" cannot name a queue: …'
 * ```
 */
export function routeNameProblem(what: 'site' | 'location', value: unknown): string | undefined {
  if (typeof value === 'string' && ROUTE_NAME.test(value)) return undefined;
  // Shown cut, and never stringified whole: a name may be any value, nested past any stack.
  const shown =
    typeof value === 'string'
      ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)
      : describeValue(value);
  return `${what} ${shown} cannot name a queue: use 1–64 letters, digits or '-' (starting with a letter or digit; no '_', '.', '*', '>' or spaces)`;
}

function badRouteName(what: 'site' | 'location', value: unknown, fix: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, `${routeNameProblem(what, value)}; ${fix}`, {
    details: { [what]: value },
  });
}

/**
 * The site route of an operation of `operationType` on `location` (the one its kind routes on,
 * `ROUTED_LOCATION_FIELD`). Throws `BAD_INPUT` when the location's type does not serve that
 * operation type (`QUEUE_OPERATIONS_BY_LOCATION_TYPE`: no worker would ever read the queue) or
 * when its site or name cannot name a queue.
 *
 * @example
 * ```ts
 * siteRoute(OperationType.LONG_TERM_ARCHIVE_TRANSFER,
 *   { site: 'cologne', name: 'cologne', locationType: LocationType.LONG_TERM_ARCHIVE });
 * // queueName of it: 'cologne_cologne_long_term_archive_long_term_archive_transfer'
 * ```
 */
export function siteRoute(operationType: OperationType, location: RoutedLocation): SiteRoute {
  const fix = 'register the location again under a name that can (opstate location add)';
  if (routeNameProblem('site', location.site) !== undefined) {
    throw badRouteName('site', location.site, fix);
  }
  if (routeNameProblem('location', location.name) !== undefined) {
    throw badRouteName('location', location.name, fix);
  }
  const served = QUEUE_OPERATIONS_BY_LOCATION_TYPE[location.locationType];
  if (!served?.includes(operationType)) {
    const at = (Object.keys(QUEUE_OPERATIONS_BY_LOCATION_TYPE) as LocationType[]).filter((t) =>
      QUEUE_OPERATIONS_BY_LOCATION_TYPE[t].includes(operationType),
    );
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `location ${location.site}/${location.name} is a ${location.locationType} location, where no worker serves ${operationType}: route it to a ${at.join(' or ')} location`,
      { details: { ...location, operationType } },
    );
  }
  return {
    operationType,
    locationType: location.locationType,
    site: location.site,
    location: location.name,
  };
}

/**
 * The site routes a worker of these operation types reads at these locations: each location with
 * each of the operation types its location type serves, in the given order.
 *
 * @example
 * ```ts
 * routesAt([{ site: 'cologne', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE }],
 *   [OperationType.LONG_TERM_ARCHIVE_TRANSFER]).map(queueName);
 * // ['cologne_lta_long_term_archive_long_term_archive_transfer']
 * ```
 */
export function routesAt(
  locations: readonly RoutedLocation[],
  operationTypes: readonly OperationType[],
): SiteRoute[] {
  const routes = new Map<string, SiteRoute>();
  for (const l of locations) {
    for (const operationType of operationTypes) {
      if (!QUEUE_OPERATIONS_BY_LOCATION_TYPE[l.locationType]?.includes(operationType)) continue;
      if (routeNameProblem('site', l.site) || routeNameProblem('location', l.name)) continue;
      const route = siteRoute(operationType, l);
      routes.set(queueName(route), route);
    }
  }
  return [...routes.values()];
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
 * The frozen queue name of a route: `<site>_<location name>_<location type>_<operation type>` for
 * a site route, `<location type>_<operation type>` for a legacy one. The same string names the
 * durable consumer; the NATS subject is derived from the route (`queueSubject`).
 *
 * @example
 * ```ts
 * queueName({ site: 'cologne', location: 'cologne', locationType: LocationType.LONG_TERM_ARCHIVE,
 *             operationType: OperationType.LONG_TERM_ARCHIVE_TRANSFER });
 * // 'cologne_cologne_long_term_archive_long_term_archive_transfer'
 * ```
 */
export function queueName(route: Route): string {
  const tail = `${route.locationType}_${route.operationType}`;
  return isSiteRoute(route) ? `${route.site}_${route.location}_${tail}` : tail;
}

/**
 * The route a queue name stands for, or undefined when it names none (site and location names
 * hold no `_`, so the name splits one way only).
 *
 * @example
 * ```ts
 * routeOfQueue('cologne_lta_long_term_archive_long_term_archive_transfer');
 * // { site: 'cologne', location: 'lta', locationType: 'long_term_archive', operationType: … }
 * ```
 */
export function routeOfQueue(name: string): Route | undefined {
  const legacy = LEGACY_BY_NAME.get(name);
  if (legacy !== undefined) return legacy;
  const [site, location, ...rest] = name.split('_');
  const tail = LEGACY_BY_NAME.get(rest.join('_'));
  if (tail === undefined || site === undefined || location === undefined) return undefined;
  if (routeNameProblem('site', site) || routeNameProblem('location', location)) return undefined;
  return { ...tail, site, location };
}

/**
 * The subject a route's dispatches are published on, under a prefix that names the deployment
 * (tests use a unique prefix per run): `<prefix>.dispatch.<site>.<location>.<location type>.<operation type>`
 * for a site route, `<prefix>.dispatch.<location type>.<operation type>` for a legacy one.
 *
 * @example
 * ```ts
 * queueSubject('opstate', route); // 'opstate.dispatch.cologne.lta.long_term_archive.long_term_archive_transfer'
 * ```
 */
export function queueSubject(prefix: string, route: Route): string {
  const tail = `${route.locationType}.${route.operationType}`;
  return isSiteRoute(route)
    ? `${prefix}.dispatch.${route.site}.${route.location}.${tail}`
    : `${prefix}.dispatch.${tail}`;
}

/**
 * The subjects a deployment's dispatch stream captures: each legacy route's subject and, per
 * frozen (location type, operation type) pair, the site routes' subjects of any site and location
 * (`<prefix>.dispatch.*.*.<location type>.<operation type>`). They never overlap: the legacy ones
 * have two tokens fewer.
 *
 * @example
 * ```ts
 * dispatchSubjects('opstate').length; // 16
 * ```
 */
export function dispatchSubjects(prefix: string): string[] {
  return allRoutes().flatMap((r) => [
    queueSubject(prefix, r),
    `${prefix}.dispatch.*.*.${r.locationType}.${r.operationType}`,
  ]);
}

/** The route a kind takes when the caller names no other. */
export function defaultRoute(kind: OperationKind): Route {
  return {
    operationType: DEFAULT_OPERATION_TYPE[kind],
    locationType: DEFAULT_LOCATION_TYPE[kind],
  };
}

/**
 * Every legacy route the frozen table allows (`<location type>_<operation type>`): the queues
 * dispatches were published on before site routes, drained at start, and the frozen tails of
 * every site route's name.
 */
export function allRoutes(): Route[] {
  return (Object.keys(QUEUE_OPERATIONS_BY_LOCATION_TYPE) as LocationType[]).flatMap(
    (locationType) =>
      QUEUE_OPERATIONS_BY_LOCATION_TYPE[locationType].map((operationType) => ({
        operationType,
        locationType,
      })),
  );
}

const LEGACY_BY_NAME: ReadonlyMap<string, Route> = new Map(
  allRoutes().map((r) => [queueName(r), r]),
);
