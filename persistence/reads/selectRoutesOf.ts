import { sql } from 'drizzle-orm';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { Route } from '../../machines/routing.ts';
import { routeOfRow } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';
import { uuidArray } from '../sql/selectOperations.ts';

/** Where an operation was dispatched, and where it stands. */
export interface OperationRoute {
  readonly route: Route;
  readonly status: OperationStatus;
  readonly attempt: number;
}

/**
 * The route (queue) and status of each of these operations, by primary key; ids that do not
 * exist are absent. The ids must be uuids (checked by the caller).
 *
 * @example
 * ```ts
 * const routes = await selectRoutesOf(database, heldIds);
 * queueName(routes.get(id)!.route); // 'cologne_buffer_buffer_data_transfer_unpacking'
 * ```
 */
export async function selectRoutesOf(
  exec: Executor,
  ids: readonly string[],
): Promise<Map<string, OperationRoute>> {
  if (ids.length === 0) return new Map();
  const rows = await exec.execute(sql`
    select o.id, o.location_type, o.operation_type, o.route_site, o.route_location, o.status,
      o.attempt from operation o
    where o.id = any(${uuidArray(ids)}::uuid[])`);
  return new Map(
    rows.map((r) => [
      String(r.id),
      {
        route: routeOfRow(r),
        status: r.status as OperationStatus,
        attempt: Number(r.attempt),
      },
    ]),
  );
}
