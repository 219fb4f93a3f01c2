import { describe, expect, it } from 'vitest';
import {
  type BreakerOutcome,
  type BreakerState,
  type CircuitFailure,
  type CircuitState,
  CLOSED_BREAKER,
  cooledDown,
  nextBreaker,
  sameBreaker,
} from '../../machines/circuitBreaker.ts';

const POLICY = { threshold: 3, cooldownMs: 60_000 };
const T0 = new Date('2031-01-01T00:00:00Z');
const later = (ms: number) => new Date(T0.getTime() + ms);
const failure = (n: number): CircuitFailure => ({
  message: `boom ${n}`,
  retryable: true,
  operationId: `op-${n}`,
  attempt: 1,
  at: T0.toISOString(),
});
const FAIL = (n = 1): BreakerOutcome => ({ type: 'FAIL', failure: failure(n) });
const COMPLETE: BreakerOutcome = { type: 'COMPLETE' };
const breaker = (state: CircuitState, failures: number, openedAt: Date | null = null) =>
  ({
    state,
    consecutiveFailures: failures,
    openedAt,
    lastFailure: failures > 0 ? failure(9) : null,
  }) satisfies BreakerState;

describe('nextBreaker: every state × outcome', () => {
  const rows: [string, BreakerState, BreakerOutcome, Partial<BreakerState>][] = [
    [
      'CLOSED + FAIL below the threshold counts',
      breaker('CLOSED', 0),
      FAIL(),
      { state: 'CLOSED', consecutiveFailures: 1, openedAt: null },
    ],
    [
      'CLOSED + FAIL reaching the threshold opens',
      breaker('CLOSED', 2),
      FAIL(),
      { state: 'OPEN', consecutiveFailures: 3, openedAt: T0 },
    ],
    [
      'CLOSED + FAIL past the threshold opens',
      breaker('CLOSED', 7),
      FAIL(),
      { state: 'OPEN', consecutiveFailures: 8, openedAt: T0 },
    ],
    [
      'CLOSED + COMPLETE clears the count',
      breaker('CLOSED', 2),
      COMPLETE,
      { state: 'CLOSED', consecutiveFailures: 0, openedAt: null },
    ],
    [
      'OPEN + FAIL (a straggler) counts and stays OPEN since when it opened',
      breaker('OPEN', 3, later(-5)),
      FAIL(),
      { state: 'OPEN', consecutiveFailures: 4, openedAt: later(-5) },
    ],
    [
      'OPEN + COMPLETE (a straggler succeeded) closes',
      breaker('OPEN', 3, later(-5)),
      COMPLETE,
      { state: 'CLOSED', consecutiveFailures: 0, openedAt: null },
    ],
    [
      'HALF_OPEN + FAIL (the probe failed) re-opens now',
      breaker('HALF_OPEN', 3, later(-60_000)),
      FAIL(),
      { state: 'OPEN', consecutiveFailures: 4, openedAt: T0 },
    ],
    [
      'HALF_OPEN + COMPLETE (the probe passed) closes',
      breaker('HALF_OPEN', 3, later(-60_000)),
      COMPLETE,
      { state: 'CLOSED', consecutiveFailures: 0, openedAt: null },
    ],
  ];
  it.each(rows)('%s', (_, before, outcome, after) => {
    expect(nextBreaker(before, outcome, T0, POLICY)).toMatchObject(after);
  });

  it('a FAIL records the failure; a COMPLETE keeps the last one for the operator', () => {
    const failed = nextBreaker(CLOSED_BREAKER, FAIL(5), T0, POLICY);
    expect(failed.lastFailure?.message).toBe('boom 5');
    expect(nextBreaker(failed, COMPLETE, T0, POLICY).lastFailure?.message).toBe('boom 5');
  });

  it('a COMPLETE on a clean CLOSED breaker returns it unchanged (nothing to write)', () => {
    expect(nextBreaker(CLOSED_BREAKER, COMPLETE, T0, POLICY)).toBe(CLOSED_BREAKER);
  });
});

describe('cooledDown', () => {
  const rows: [string, BreakerState, Date, CircuitState][] = [
    ['OPEN before the cooldown stays OPEN', breaker('OPEN', 3, T0), later(59_999), 'OPEN'],
    ['OPEN at the cooldown turns HALF_OPEN', breaker('OPEN', 3, T0), later(60_000), 'HALF_OPEN'],
    [
      'OPEN long after the cooldown turns HALF_OPEN',
      breaker('OPEN', 3, T0),
      later(3_600_000),
      'HALF_OPEN',
    ],
    [
      'OPEN without an opening time (damaged) is left alone',
      breaker('OPEN', 3, null),
      later(3_600_000),
      'OPEN',
    ],
    ['HALF_OPEN is left alone', breaker('HALF_OPEN', 3, T0), later(3_600_000), 'HALF_OPEN'],
    ['CLOSED is left alone', breaker('CLOSED', 2), later(3_600_000), 'CLOSED'],
  ];
  it.each(rows)('%s', (_, before, now, state) => {
    const after = cooledDown(before, now, POLICY);
    expect(after.state).toBe(state);
    if (state === before.state) expect(after).toBe(before);
    else expect(after).toMatchObject({ openedAt: before.openedAt, consecutiveFailures: 3 });
  });
});

describe('sameBreaker', () => {
  const a = breaker('OPEN', 3, T0);
  const rows: [string, BreakerState, boolean][] = [
    ['itself', a, true],
    ['an equal copy (dates compared by time)', { ...a, openedAt: new Date(T0.getTime()) }, true],
    ['another state', { ...a, state: 'HALF_OPEN' }, false],
    ['another count', { ...a, consecutiveFailures: 4 }, false],
    ['another opening time', { ...a, openedAt: later(1) }, false],
    ['another last failure', { ...a, lastFailure: failure(1) }, false],
  ];
  it.each(rows)('%s', (_, b, same) => {
    expect(sameBreaker(a, b)).toBe(same);
  });
});
