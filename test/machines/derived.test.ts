import { describe, expect, it } from 'vitest';
import { deriveGroupStatus } from '../../machines/groupStatus.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { derivePackageState } from '../../machines/packageState.ts';

describe('group status, derived from children', () => {
  it.each([
    [[], 'EMPTY'],
    [['PENDING', 'PENDING'], 'PENDING'],
    [['PENDING', 'SCHEDULED'], 'SCHEDULED'],
    [['PENDING', 'IN_PROGRESS'], 'IN_PROGRESS'],
    [['COMPLETED', 'PENDING'], 'IN_PROGRESS'],
    [['COMPLETED', 'COMPLETED'], 'COMPLETED'],
    [['COMPLETED', 'FAILED'], 'FAILED'],
    [['FAILED', 'IN_PROGRESS'], 'IN_PROGRESS'],
  ] as const)('%j → %s', (children, want) => {
    expect(deriveGroupStatus(children)).toBe(want);
  });
});

describe('package state, derived from operations', () => {
  const K = OperationKind;
  it.each([
    [[], 'PLANNED'],
    [[{ kind: K.RAW_DATA_PACKAGE, status: 'IN_PROGRESS' }], 'PACKAGING'],
    [[{ kind: K.RAW_DATA_PACKAGE, status: 'COMPLETED' }], 'PACKAGED'],
    [
      [
        { kind: K.RAW_DATA_PACKAGE, status: 'COMPLETED' },
        { kind: K.TRANSFER, status: 'SCHEDULED' },
      ],
      'TRANSFERRING',
    ],
    [
      [
        { kind: K.TRANSFER, status: 'COMPLETED' },
        { kind: K.UNPACK, status: 'COMPLETED' },
      ],
      'TRANSFERRED',
    ],
    [
      [
        { kind: K.TRANSFER, status: 'COMPLETED' },
        { kind: K.LONG_TERM_ARCHIVE, status: 'IN_PROGRESS' },
      ],
      'ARCHIVING',
    ],
    [
      [
        { kind: K.LONG_TERM_ARCHIVE, status: 'FAILED' },
        { kind: K.LONG_TERM_ARCHIVE, status: 'COMPLETED' },
      ],
      'ARCHIVED',
    ],
    [
      [
        { kind: K.RAW_DATA_PACKAGE, status: 'COMPLETED' },
        { kind: K.TRANSFER, status: 'FAILED' },
      ],
      'FAILED',
    ],
    [
      [
        { kind: K.TRANSFER, status: 'FAILED' },
        { kind: K.TRANSFER, status: 'COMPLETED' },
      ],
      'TRANSFERRED',
    ],
    [
      [
        { kind: K.RAW_DATA_PACKAGE, status: 'COMPLETED' },
        { kind: K.STAGING, status: 'FAILED' },
      ],
      'PACKAGED',
    ],
  ] as const)('%j → %s', (ops, want) => {
    expect(derivePackageState(ops)).toBe(want);
  });
});
