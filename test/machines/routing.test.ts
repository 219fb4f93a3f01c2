import { describe, expect, it } from 'vitest';
import { isOperationKind, OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import {
  allRoutes,
  defaultRoute,
  LocationType,
  OperationType,
  QUEUE_OPERATIONS_BY_LOCATION_TYPE,
  queueName,
  queueSubject,
} from '../../machines/routing.ts';

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
