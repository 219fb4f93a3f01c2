import { sql } from 'drizzle-orm';
import type { LocationType, RoutedLocation } from '../../machines/routing.ts';
import type { Executor } from '../openDatabase.ts';
import { uuidArray } from '../sql/selectOperations.ts';
import { isUuid } from '../subtypeFields.ts';

/**
 * The registered locations by id, as routing sees them (site, name, type); ids that are not uuids
 * or name no location are absent (the insert then refuses them as it always did).
 *
 * @example
 * ```ts
 * const byId = await selectRoutedLocations(database, [destinationLocationId]);
 * siteRoute(OperationType.DATA_TRANSFER, byId.get(destinationLocationId)!);
 * ```
 */
export async function selectRoutedLocations(
  exec: Executor,
  ids: readonly unknown[],
): Promise<Map<string, RoutedLocation>> {
  const wanted = [...new Set(ids.filter(isUuid))];
  if (wanted.length === 0) return new Map();
  const rows = await exec.execute(sql`
    select id, site, name, location_type from data_location
    where id = any(${uuidArray(wanted)}::uuid[])`);
  return new Map(
    rows.map((r) => [
      String(r.id),
      { site: String(r.site), name: String(r.name), locationType: r.location_type as LocationType },
    ]),
  );
}

/**
 * The registered locations of one site (every site when not given), as routing sees them, in
 * site and name order: what a worker discovers its queues from.
 *
 * @example
 * ```ts
 * routesAt(await selectLocationsAt(database, 'cologne'), [OperationType.DATA_TRANSFER]);
 * ```
 */
export async function selectLocationsAt(exec: Executor, site?: string): Promise<RoutedLocation[]> {
  const where = site === undefined ? sql`true` : sql`site = ${site}`;
  const rows = await exec.execute(sql`
    select site, name, location_type from data_location where ${where} order by site, name`);
  return rows.map((r) => ({
    site: String(r.site),
    name: String(r.name),
    locationType: r.location_type as LocationType,
  }));
}
