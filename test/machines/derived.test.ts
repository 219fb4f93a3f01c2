import { describe, expect, it } from 'vitest';
import { deriveGroupStatus } from '../../machines/groupStatus.ts';

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
