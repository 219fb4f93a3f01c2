import { describe, expect, it } from 'vitest';
import {
  DEFAULT_DEADLINES_MS,
  deadlineOf,
  deadlineProblem,
  describeDeadline,
  formatDeadline,
  MAX_DEADLINE_MS,
  resolveDeadlines,
} from '../../machines/deadlines.ts';
import { durationMs } from '../../machines/durationMs.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';

const HOUR = 3_600_000;

describe('deadlines', () => {
  it('every kind has a generous default of hours, within the cap', () => {
    for (const kind of OPERATION_KINDS) {
      expect(DEFAULT_DEADLINES_MS[kind]).toBeGreaterThanOrEqual(6 * HOUR);
      expect(deadlineProblem(DEFAULT_DEADLINES_MS[kind])).toBeUndefined();
    }
    expect(resolveDeadlines()).toEqual(DEFAULT_DEADLINES_MS);
  });

  it('overrides replace the kinds they name and keep the rest', () => {
    const d = resolveDeadlines({ transfer: 2 * HOUR, staging: undefined });
    expect(d.transfer).toBe(2 * HOUR);
    expect(d.staging).toBe(DEFAULT_DEADLINES_MS.staging);
  });

  it.each([
    [
      { tranfer: HOUR },
      "deadline for unknown operation kind 'tranfer'; use one of raw_data_package",
    ],
    [
      { transfer: 0 },
      'the deadline of transfer must be a whole number of milliseconds from 1 to 604800000 (7 days); got 0',
    ],
    [{ transfer: 1.5 }, 'got 1.5'],
    [{ transfer: MAX_DEADLINE_MS + 1 }, `got ${MAX_DEADLINE_MS + 1}`],
    [{ transfer: '2h' }, "got '2h'"],
  ])('refuses %j with CONFIG', (overrides, message) => {
    expect(() => resolveDeadlines(overrides)).toThrow(
      expect.objectContaining({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining(message),
      }),
    );
  });

  it('an operation’s own deadline wins over its kind’s, and says where it comes from', () => {
    expect(deadlineOf(OperationKind.TRANSFER, null, DEFAULT_DEADLINES_MS)).toEqual({
      ms: 12 * HOUR,
      source: 'kind',
    });
    const own = deadlineOf(OperationKind.TRANSFER, 3_000, DEFAULT_DEADLINES_MS);
    expect(own).toEqual({ ms: 3_000, source: 'operation' });
    expect(describeDeadline(OperationKind.TRANSFER, own)).toBe('3 s (set at submit)');
    expect(
      describeDeadline(OperationKind.LONG_TERM_ARCHIVE, { ms: 24 * HOUR, source: 'kind' }),
    ).toBe("24 h (long_term_archive's)");
  });

  it.each([
    [250, '250 ms'],
    [3_000, '3 s'],
    [90 * 60_000, '90 min'],
    [6 * HOUR, '6 h'],
    [24 * HOUR, '24 h'],
    [MAX_DEADLINE_MS, '7 d'],
    [3_500, '3.5 s'],
  ])('formats %d ms as %s', (ms, text) => {
    expect(formatDeadline(ms)).toBe(text);
  });

  it.each([
    ['6h', 's', 6 * HOUR],
    ['90m', 's', 90 * 60_000],
    ['1.5d', 's', 36 * HOUR],
    ['500ms', 's', 500],
    ['30', 's', 30_000],
    ['7200000', 'ms', 7_200_000],
    ['soon', 's', undefined],
    ['-1h', 's', undefined],
  ] as const)('reads the duration %s (bare: %s) as %s ms', (text, bare, ms) => {
    expect(durationMs(text, bare)).toBe(ms);
  });
});
