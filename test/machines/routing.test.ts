import { describe, expect, it } from 'vitest';
import { planMove } from '../../control-plane/planMove.ts';
import { isOperationKind, OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import {
  allRoutes,
  DEFAULT_DISCOVERY_INTERVAL_MS,
  defaultRoute,
  dispatchSubjects,
  LocationType,
  OperationType,
  QUEUE_OPERATIONS_BY_LOCATION_TYPE,
  queueName,
  queueSubject,
  ROUTED_LOCATION_FIELD,
  routeNameProblem,
  routeOfQueue,
  routesAt,
  siteRoute,
} from '../../machines/routing.ts';
import { planDiscovery } from '../../worker/planDiscovery.ts';

describe('identity axis', () => {
  it('keeps the six frozen kind strings', () => {
    expect(OPERATION_KINDS.map(String)).toEqual([
      'raw_data_package',
      'data_transfer_package',
      'transfer',
      'unpack',
      'long_term_archive',
      'staging',
    ]);
    expect(Object.values(OperationKind).sort()).toEqual([...OPERATION_KINDS].sort());
  });

  it('narrows outside strings only to known kinds', () => {
    expect(isOperationKind('long_term_archive')).toBe(true);
    expect(isOperationKind('archive')).toBe(false);
    expect(isOperationKind(undefined)).toBe(false);
  });
});

describe('routing axis: queue names are a frozen contract', () => {
  it('freezes today’s queue names', () => {
    expect(allRoutes().map(queueName)).toEqual([
      'source_raw_data_package_creation',
      'source_data_transfer_package_creation',
      'source_data_transfer',
      'buffer_data_transfer',
      'buffer_data_transfer_unpacking',
      'buffer_data_transfer_package_creation',
      'long_term_archive_long_term_archive_transfer',
      'processing_staging',
    ]);
  });

  it('builds the default queue of each kind from routing alone', () => {
    expect(Object.fromEntries(OPERATION_KINDS.map((k) => [k, queueName(defaultRoute(k))]))).toEqual(
      {
        raw_data_package: 'source_raw_data_package_creation',
        data_transfer_package: 'source_data_transfer_package_creation',
        transfer: 'source_data_transfer',
        unpack: 'buffer_data_transfer_unpacking',
        long_term_archive: 'long_term_archive_long_term_archive_transfer',
        staging: 'processing_staging',
      },
    );
  });

  it('routes every kind to a queue that its location type serves', () => {
    for (const kind of OPERATION_KINDS) {
      const route = defaultRoute(kind);
      expect(QUEUE_OPERATIONS_BY_LOCATION_TYPE[route.locationType]).toContain(route.operationType);
    }
  });

  it('derives subjects under a deployment prefix', () => {
    expect(
      queueSubject('opstate', {
        locationType: LocationType.LONG_TERM_ARCHIVE,
        operationType: OperationType.LONG_TERM_ARCHIVE_TRANSFER,
      }),
    ).toBe('opstate.dispatch.long_term_archive.long_term_archive_transfer');
  });
});

describe('site routes: work reaches only the workers that can reach its storage', () => {
  const lta = { site: 'cologne', name: 'cologne', locationType: LocationType.LONG_TERM_ARCHIVE };

  it('names a site queue after the site, the location and the frozen tail', () => {
    const route = siteRoute(OperationType.LONG_TERM_ARCHIVE_TRANSFER, lta);
    expect(queueName(route)).toBe('cologne_cologne_long_term_archive_long_term_archive_transfer');
    expect(queueSubject('opstate', route)).toBe(
      'opstate.dispatch.cologne.cologne.long_term_archive.long_term_archive_transfer',
    );
    expect(routeOfQueue(queueName(route))).toEqual(route);
  });

  it('routes each kind on the field whose storage its handler must reach', () => {
    expect(ROUTED_LOCATION_FIELD).toEqual({
      raw_data_package: 'locationId',
      data_transfer_package: 'locationId',
      transfer: 'destinationLocationId',
      unpack: 'locationId',
      long_term_archive: 'destinationLocationId',
      staging: 'destinationLocationId',
    });
  });

  it('refuses a location whose type does not serve the operation type, naming the types that do', () => {
    expect(() => siteRoute(OperationType.STAGING, lta)).toThrow(
      /cologne\/cologne is a long_term_archive location, where no worker serves staging: route it to a processing location/,
    );
  });

  it.each([
    ['under_score'],
    ['dot.ted'],
    ['star*'],
    ['gt>'],
    ['with space'],
    [''],
    ['-lead'],
    ['x'.repeat(65)],
  ])(
    'refuses the name %j: it could not be one subject token and one part of a consumer name',
    (bad) => {
      expect(routeNameProblem('site', bad)).toMatch(/cannot name a queue/);
      expect(() =>
        siteRoute(OperationType.LONG_TERM_ARCHIVE_TRANSFER, { ...lta, site: bad }),
      ).toThrow(/site .* cannot name a queue: use 1–64 letters, digits or '-'/);
      expect(() =>
        siteRoute(OperationType.LONG_TERM_ARCHIVE_TRANSFER, { ...lta, name: bad }),
      ).toThrow(/location .* cannot name a queue/);
    },
  );

  it('reads a queue name back one way only, and no legacy name as a site queue', () => {
    for (const legacy of allRoutes()) {
      expect(routeOfQueue(queueName(legacy))).toEqual(legacy);
    }
    expect(routeOfQueue('a_b_processing_staging')).toEqual({
      site: 'a',
      location: 'b',
      locationType: LocationType.PROCESSING,
      operationType: OperationType.STAGING,
    });
    expect(routeOfQueue('a_b_processing_nothing')).toBeUndefined();
    expect(routeOfQueue('a.b_c_processing_staging')).toBeUndefined();
  });

  it('finds the routes at locations from the frozen table, each once', () => {
    const at = [
      { site: 's', name: 'src', locationType: LocationType.SOURCE },
      { site: 's', name: 'buf', locationType: LocationType.BUFFER },
      { site: 's', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE },
    ];
    expect(
      routesAt(at, [OperationType.DATA_TRANSFER, OperationType.DATA_TRANSFER]).map(queueName),
    ).toEqual(['s_src_source_data_transfer', 's_buf_buffer_data_transfer']);
  });

  it('captures legacy and site subjects in the stream, never overlapping', () => {
    const subjects = dispatchSubjects('p');
    expect(subjects).toHaveLength(16);
    expect(subjects).toContain('p.dispatch.source.data_transfer');
    expect(subjects).toContain('p.dispatch.*.*.source.data_transfer');
    expect(new Set(subjects).size).toBe(16);
  });
});

describe('planDiscovery: the queues a worker reads from where it runs', () => {
  const registered = [
    { site: 'bonn', name: 'buf', locationType: LocationType.BUFFER },
    { site: 'cologne', name: 'buf', locationType: LocationType.BUFFER },
    { site: 'cologne', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE },
  ];
  const names = (d: ReturnType<typeof planDiscovery>) =>
    d.type === 'routes' ? d.routes.map(queueName) : d.reason;

  it("reads its site's locations that serve its kinds", () => {
    expect(
      names(
        planDiscovery(registered, { site: 'cologne' }, [
          OperationKind.TRANSFER,
          OperationKind.LONG_TERM_ARCHIVE,
        ]),
      ),
    ).toEqual([
      'cologne_buf_buffer_data_transfer',
      'cologne_lta_long_term_archive_long_term_archive_transfer',
    ]);
    expect(
      names(
        planDiscovery(registered, { site: 'cologne', locations: ['lta'] }, [
          OperationKind.LONG_TERM_ARCHIVE,
        ]),
      ),
    ).toEqual(['cologne_lta_long_term_archive_long_term_archive_transfer']);
  });

  it('without a site, reads every site and its kinds’ legacy queues as before', () => {
    expect(names(planDiscovery(registered, {}, [OperationKind.TRANSFER]))).toEqual([
      'bonn_buf_buffer_data_transfer',
      'cologne_buf_buffer_data_transfer',
      'source_data_transfer',
    ]);
  });

  it('refuses an unknown site or location with the fix', () => {
    expect(names(planDiscovery(registered, { site: 'paris' }, [OperationKind.TRANSFER]))).toMatch(
      /site "paris" has no location registered: check --site, or register one first/,
    );
    expect(
      names(
        planDiscovery(registered, { site: 'cologne', locations: ['lta', 'nope'] }, [
          OperationKind.TRANSFER,
        ]),
      ),
    ).toMatch(/site cologne has no location "nope"; it has buf, lta: check --locations/);
    expect(
      names(planDiscovery(registered, { locations: ['lta'] }, [OperationKind.TRANSFER])),
    ).toMatch(/give the site too/);
  });

  it('looks again every 5 s by default', () => {
    expect(DEFAULT_DISCOVERY_INTERVAL_MS).toBe(5_000);
  });
});

describe('planMove: dispatches queued under the legacy names', () => {
  const route = siteRoute(OperationType.STAGING, {
    site: 's',
    name: 'proc',
    locationType: LocationType.PROCESSING,
  });
  const message = {
    operationId: 'op',
    kind: OperationKind.STAGING,
    operationType: OperationType.STAGING,
    attempt: 2,
  };
  it.each([
    [
      'an operation waiting on it moves',
      { route, status: 'SCHEDULED', attempt: 2 },
      { type: 'move', route },
    ],
    [
      'one running moves (a redelivery may recover it)',
      { route, status: 'IN_PROGRESS', attempt: 2 },
      { type: 'move', route },
    ],
    [
      'a stale attempt is dropped',
      { route, status: 'SCHEDULED', attempt: 3 },
      { type: 'drop', reason: 'stale attempt 2 (now 3)' },
    ],
    [
      'a finished operation is dropped',
      { route, status: 'COMPLETED', attempt: 2 },
      { type: 'drop', reason: 'the operation is COMPLETED' },
    ],
    [
      'one without a site route stays',
      { route: defaultRoute(OperationKind.STAGING), status: 'SCHEDULED', attempt: 2 },
      { type: 'leave' },
    ],
  ] as const)('%s', (_, current, expected) => {
    expect(planMove(message, current)).toEqual(expected);
  });
  it('an operation that is gone is dropped', () => {
    expect(planMove(message, undefined)).toEqual({ type: 'drop', reason: 'no such operation' });
  });
});
