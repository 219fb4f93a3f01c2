import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { deriveGroupStatus } from '../../machines/groupStatus.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { derivePackageState } from '../../machines/packageState.ts';
import { type PhysicalCopyEvent, physicalCopyMachine } from '../../machines/physicalCopyMachine.ts';

function run(events: PhysicalCopyEvent[], maxDeletionFailures = 2) {
  let [s] = initialTransition(physicalCopyMachine, { maxDeletionFailures });
  for (const e of events) [s] = transition(physicalCopyMachine, s, e);
  return s;
}

const schedule = (verifiedCopyElsewhere: boolean, retained: boolean): PhysicalCopyEvent => ({
  type: 'SCHEDULE_DELETION',
  verifiedCopyElsewhere,
  retained,
});

describe('physical-copy deletion machine', () => {
  it('walks PRESENT → DELETION_SCHEDULED → DELETION_IN_PROGRESS → DELETED', () => {
    const s = run([
      schedule(true, false),
      { type: 'START_DELETION' },
      { type: 'DELETION_SUCCEEDED' },
    ]);
    expect(s.value).toBe('DELETED');
    expect(s.status).toBe('done');
  });

  it('never schedules deletion of the only verified copy, nor of a retained one', () => {
    expect(run([schedule(false, false)]).value).toBe('PRESENT');
    expect(run([schedule(true, true)]).value).toBe('PRESENT');
    expect(run([{ type: 'START_DELETION' }]).value).toBe('PRESENT');
  });

  it('counts failures and stops retrying at the cap', () => {
    const fail: PhysicalCopyEvent = { type: 'DELETION_FAILED', error: 'EBUSY' };
    const once = run([schedule(true, false), { type: 'START_DELETION' }, fail]);
    expect(once.value).toBe('DELETION_FAILED');
    expect(once.context).toMatchObject({ deletionFailureCount: 1, lastError: 'EBUSY' });
    const capped = run([
      schedule(true, false),
      { type: 'START_DELETION' },
      fail,
      { type: 'RETRY_DELETION' },
      { type: 'START_DELETION' },
      fail,
      { type: 'RETRY_DELETION' },
    ]);
    expect(capped.value).toBe('DELETION_FAILED');
    expect(capped.context.deletionFailureCount).toBe(2);
  });

  it('withdraws a deletion that has not started', () => {
    expect(run([schedule(true, false), { type: 'CANCEL_DELETION' }]).value).toBe('PRESENT');
    expect(
      run([schedule(true, false), { type: 'START_DELETION' }, { type: 'CANCEL_DELETION' }]).value,
    ).toBe('DELETION_IN_PROGRESS');
  });
});

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
