import { describe, expect, it } from 'vitest';
import { type SiteRoutesDeps, siteRoutes } from '../../control-plane/siteRoutes.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import {
  defaultRoute,
  LocationType,
  OperationType,
  queueName,
  type Route,
  type RoutedLocation,
  siteRoute,
} from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { Transport } from '../../transport/Transport.ts';

/** A registry of locations and a transport that records what it was asked to create. */
function world() {
  const registered: RoutedLocation[] = [];
  const created: string[][] = [];
  const deps: SiteRoutesDeps = {
    store: {
      routedLocations: async () => [...registered],
      loadMany: async () => new Map(),
    },
    transport: {
      ensure: async (routes: readonly Route[]) => {
        created.push(routes.map(queueName));
      },
    } as unknown as Transport,
    logger: memoryLogger(),
  };
  return { registered, created, routes: siteRoutes(deps) };
}

const lta = (name: string): RoutedLocation => ({
  site: 'bonn',
  name,
  locationType: LocationType.LONG_TERM_ARCHIVE,
});
const archiveAt = (name: string) => siteRoute(OperationType.LONG_TERM_ARCHIVE_TRANSFER, lta(name));

describe('the site routes pass', () => {
  it('creates each registered location’s queues once, and only the new ones at a later pass', async () => {
    const { registered, created, routes } = world();
    registered.push(lta('a'));
    await routes.pass();
    await routes.pass();
    registered.push(lta('b'));
    await routes.pass();
    expect(created).toEqual([[queueName(archiveAt('a'))], [queueName(archiveAt('b'))]]);
  });

  it('asks to be woken once for a site queue it has not created, never for one it has or a legacy queue', async () => {
    const { registered, routes } = world();
    registered.push(lta('a'));
    await routes.pass();
    expect(routes.wakeFor(archiveAt('a'))).toBe(false);
    expect(routes.wakeFor(defaultRoute(OperationKind.LONG_TERM_ARCHIVE))).toBe(false);
    // Registered since the last pass: the first dispatch there wakes the pass, the next ones do
    // not (the pass woken finds it; if it did not, the passes at the interval will).
    registered.push(lta('b'));
    expect(routes.wakeFor(archiveAt('b'))).toBe(true);
    expect(routes.wakeFor(archiveAt('b'))).toBe(false);
    await routes.pass();
    expect(routes.wakeFor(archiveAt('b'))).toBe(false);
  });
});
