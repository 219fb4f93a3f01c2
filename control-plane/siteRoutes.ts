import {
  allRoutes,
  isSiteRoute,
  OPERATION_TYPES_IN_USE,
  queueName,
  type Route,
  routesAt,
} from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';
import type { Delivery, Subscription, Transport } from '../transport/Transport.ts';
import { planMove } from './planMove.ts';

/** What the site routes' pass and the legacy drain need. */
export interface SiteRoutesDeps {
  readonly store: Pick<OperationStore, 'routedLocations' | 'loadMany'>;
  readonly transport: Transport;
  readonly logger: Logger;
}

/** The site routes' pass, and what it has created so far. */
export interface SiteRoutes {
  /** One pass; returns false (nothing more). */
  readonly pass: () => Promise<boolean>;
  /**
   * Whether a dispatch to `route` should wake the pass: a site route whose consumer no pass of
   * this process has created (a location registered since the last pass), asked once per queue.
   * A pass woken during another runs again after it, so the one wake finds the location; a
   * queue the pass still does not find waits for the passes at the interval, and does not make
   * every scheduler pass wake it again.
   */
  readonly wakeFor: (route: Route) => boolean;
}

/**
 * A pass that creates the consumer of every site route of every registered location (each
 * location with each operation type its location type serves), once per process: a worker with
 * least-privilege credentials reads its queues once they exist.
 *
 * @example
 * ```ts
 * const routes = siteRoutes({ store, transport, logger }); await routes.pass();
 * ```
 */
export function siteRoutes(deps: SiteRoutesDeps): SiteRoutes {
  const ensured = new Set<string>();
  const asked = new Set<string>();
  return {
    pass: async () => {
      const routes = routesAt(await deps.store.routedLocations(), OPERATION_TYPES_IN_USE);
      const fresh = routes.filter((r) => !ensured.has(queueName(r)));
      if (fresh.length === 0) return false;
      await deps.transport.ensure(fresh);
      for (const r of fresh) ensured.add(queueName(r));
      deps.logger.log('INFO', 'site queues ready', { queues: fresh.map(queueName) });
      return false;
    },
    wakeFor: (route) => {
      if (!isSiteRoute(route)) return false;
      const queue = queueName(route);
      if (ensured.has(queue) || asked.has(queue)) return false;
      asked.add(queue);
      return true;
    },
  };
}

/**
 * Moves one dispatch off a legacy queue (`planMove`): published again on its operation's site
 * route, then acked; a publish the broker drops as a duplicate (the same attempt published within
 * the duplicate window) is naked until the window has passed, so the legacy copy is acked only
 * once a copy is stored under the new name. Fencing by attempt makes any second copy harmless.
 */
async function moveOne(deps: SiteRoutesDeps, d: Delivery): Promise<void> {
  const { operationId, attempt } = d.message;
  const current = (await deps.store.loadMany([operationId])).get(operationId);
  const move = planMove(d.message, current);
  if (move.type === 'drop') {
    d.term();
    return;
  }
  if (move.type === 'leave') {
    d.nak(deps.transport.timing.heartbeatIntervalMs);
    return;
  }
  const published = await deps.transport.publish(move.route, d.message);
  if (published.duplicate) {
    d.nak(deps.transport.timing.duplicateWindowMs);
    return;
  }
  await d.ack();
  deps.logger.log('INFO', 'dispatch moved to its site queue', {
    operationId,
    attempt,
    from: queueName(d.route),
    queue: queueName(move.route),
  });
}

/**
 * Drains the legacy queues (`<location type>_<operation type>`) while the control plane leads:
 * each dispatch queued there before the upgrade (or by an older release still running) is moved
 * onto its operation's site route, so nothing in flight is orphaned. Stop the subscriptions to
 * end it.
 *
 * @example
 * ```ts
 * const subs = drainLegacyQueues({ store, transport, logger });
 * await Promise.all(subs.map((s) => s.stop()));
 * ```
 */
export function drainLegacyQueues(deps: SiteRoutesDeps): Subscription[] {
  return allRoutes().map((route) =>
    deps.transport.consume(route, { concurrency: 16 }, (d) => moveOne(deps, d)),
  );
}
