import type { OperationKind } from '../machines/OperationKind.ts';

export { DEFAULT_DISCOVERY_INTERVAL_MS } from '../machines/routing.ts';

import {
  DEFAULT_OPERATION_TYPE,
  defaultRoute,
  queueName,
  type Route,
  type RoutedLocation,
  routesAt,
} from '../machines/routing.ts';

/** Where a worker runs: a site, and optionally only some of its locations. */
export interface WorkerPlacement {
  /** The site whose locations' queues it reads; absent: every site's. */
  readonly site?: string | undefined;
  /** Only these locations of the site (by name); absent: all of them. Needs `site`. */
  readonly locations?: readonly string[] | undefined;
}

/** What a discovery pass finds: the routes to read, or why the placement is refused. */
export type Discovery =
  | { readonly type: 'routes'; readonly routes: readonly Route[] }
  | { readonly type: 'refused'; readonly reason: string };

/**
 * The queues a worker of these kinds reads, from the locations registered for its site (all of
 * them, or those it names): each location with each of its kinds' operation types its location
 * type serves. A site with no location registered, or a location name the site does not have, is
 * refused with the fix; a worker without a site reads every site's, and the legacy queue of each
 * of its kinds as it did before site routes.
 *
 * @example
 * ```ts
 * planDiscovery(await store.routedLocations('cologne'), { site: 'cologne' }, [OperationKind.LONG_TERM_ARCHIVE]);
 * // { type: 'routes', routes: [{ site: 'cologne', location: 'lta', … }] }
 * ```
 */
export function planDiscovery(
  registered: readonly RoutedLocation[],
  placement: WorkerPlacement,
  kinds: readonly OperationKind[],
): Discovery {
  const { site, locations } = placement;
  if (locations !== undefined && site === undefined) {
    return { type: 'refused', reason: 'locations name places at one site: give the site too' };
  }
  const atSite = site === undefined ? registered : registered.filter((l) => l.site === site);
  if (site !== undefined && atSite.length === 0) {
    return {
      type: 'refused',
      reason: `site ${JSON.stringify(site)} has no location registered: check --site, or register one first (opstate location add --site ${site} …)`,
    };
  }
  const unknown = (locations ?? []).filter((n) => !atSite.some((l) => l.name === n));
  if (unknown.length > 0) {
    return {
      type: 'refused',
      reason: `site ${site} has no location ${unknown.map((n) => JSON.stringify(n)).join(', ')}; it has ${atSite.map((l) => l.name).join(', ')}: check --locations, or register it first (opstate location add)`,
    };
  }
  const chosen =
    locations === undefined ? atSite : atSite.filter((l) => locations.includes(l.name));
  const types = [...new Set(kinds.map((k) => DEFAULT_OPERATION_TYPE[k]))];
  const routes: Route[] = routesAt(chosen, types);
  if (site === undefined) {
    // As before site routes: the legacy queues of its kinds, where dispatches of operations that
    // could not be given a site route still go (and older releases still publish).
    const legacy = new Map(kinds.map((k) => [queueName(defaultRoute(k)), defaultRoute(k)]));
    routes.push(...legacy.values());
  }
  return { type: 'routes', routes };
}
