import {
  OPERATION_TYPES_IN_USE,
  queueName,
  type RoutedLocation,
  routesAt,
} from '../machines/routing.ts';
import type { QueueView } from './workersPage.ts';

/**
 * Registered locations none of whose queues has work or a live worker reading it: no worker of
 * their site runs for any kind they route, and nothing waits to show it on the attention list.
 * `queues` must hold every registered location's site queues (as the /workers page lists them).
 *
 * @example
 * ```ts
 * idleUnserved(await selectLocationsAt(database), data.queues); // ['bonn/lta']
 * ```
 */
export function idleUnserved(
  locations: readonly RoutedLocation[],
  queues: readonly QueueView[],
): string[] {
  const byName = new Map(queues.map((q) => [q.queue, q]));
  return locations
    .filter((loc) => {
      const own = routesAt([loc], OPERATION_TYPES_IN_USE).map((r) => byName.get(queueName(r)));
      return own.every(
        (q) =>
          q === undefined || (q.waiting === 0 && q.inProgress === 0 && q.liveWorkers.length === 0),
      );
    })
    .map((loc) => `${loc.site}/${loc.name}`);
}
