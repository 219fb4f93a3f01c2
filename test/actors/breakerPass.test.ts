import { describe, expect, it } from 'vitest';
import {
  type BreakerRepository,
  startCircuitBreakerLoop,
} from '../../control-plane/CircuitBreaker.ts';
import {
  breakerPairs,
  planBreakerPass,
  reportBreakerWrites,
} from '../../control-plane/planBreakerPass.ts';
import type { CircuitState } from '../../machines/circuitBreaker.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { LATE_COMMIT_GRACE_MS, TransitionCursor } from '../../observe/TransitionCursor.ts';
import type {
  CircuitBreakerRecord,
  CircuitBreakerView,
  CircuitBreakerWrite,
  TransitionOutcome,
} from '../../persistence/CircuitBreakerRepository.ts';
import type { Executor } from '../../persistence/openDatabase.ts';

const POLICY = { threshold: 2, cooldownMs: 60_000 };
const T0 = new Date('2031-01-01T00:00:00Z');
const LTA = OperationKind.LONG_TERM_ARCHIVE;
const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';

let nextId = 1;
function row(
  outcome: 'FAIL' | 'COMPLETE' | null,
  locationId: string | null = A,
): TransitionOutcome {
  const id = nextId++;
  return {
    id,
    outcome,
    kind: outcome === null ? null : LTA,
    locationId: outcome === null ? null : locationId,
    operationId: `op-${id}`,
    attempt: 1,
    at: T0,
    error: outcome === 'FAIL' ? { message: `upload refused ${id}`, retryable: true } : null,
  };
}
function record(
  locationId: string,
  state: CircuitState,
  failures: number,
  openedAt: Date | null,
): CircuitBreakerRecord {
  return {
    kind: LTA,
    locationId,
    state,
    consecutiveFailures: failures,
    openedAt,
    lastFailure: null,
    version: 7,
    updatedAt: openedAt,
  };
}
const asView = (w: CircuitBreakerWrite): CircuitBreakerView => ({
  ...w,
  version: (w.expectedVersion ?? 0) + 1,
  location: `site/${w.locationId.slice(-1)}`,
});

describe('planBreakerPass', () => {
  const rows: [
    string,
    TransitionOutcome[],
    CircuitBreakerRecord[],
    number,
    Partial<CircuitBreakerWrite>[],
  ][] = [
    [
      'successes only on a clean pair: nothing to write',
      [row('COMPLETE'), row('COMPLETE')],
      [],
      0,
      [],
    ],
    ['other events are ignored', [row(null), row(null)], [], 0, []],
    [
      'one failure below the threshold: a new row counting it',
      [row('FAIL')],
      [],
      0,
      [{ locationId: A, state: 'CLOSED', consecutiveFailures: 1, expectedVersion: null }],
    ],
    [
      'failures reaching the threshold open the pair, now',
      [row('FAIL'), row('FAIL')],
      [],
      0,
      [{ state: 'OPEN', consecutiveFailures: 2, openedAt: T0 }],
    ],
    [
      'a success between failures resets the count',
      [row('FAIL'), row('COMPLETE'), row('FAIL')],
      [],
      0,
      [{ state: 'CLOSED', consecutiveFailures: 1 }],
    ],
    [
      'pairs are counted apart',
      [row('FAIL', A), row('FAIL', B)],
      [],
      0,
      [
        { locationId: A, consecutiveFailures: 1 },
        { locationId: B, consecutiveFailures: 1 },
      ],
    ],
    [
      'a stored count carries on, compare-and-set on its version',
      [row('FAIL')],
      [record(A, 'CLOSED', 1, null)],
      0,
      [{ state: 'OPEN', consecutiveFailures: 2, expectedVersion: 7 }],
    ],
    [
      'an OPEN pair with nothing new half-opens once cooled down',
      [],
      [record(A, 'OPEN', 2, T0)],
      60_000,
      [{ state: 'HALF_OPEN', expectedVersion: 7 }],
    ],
    ['an OPEN pair not yet cooled down is left alone', [], [record(A, 'OPEN', 2, T0)], 59_999, []],
    [
      'a failed probe re-opens a HALF_OPEN pair from now',
      [row('FAIL')],
      [record(A, 'HALF_OPEN', 2, T0)],
      90_000,
      [{ state: 'OPEN', consecutiveFailures: 3, openedAt: new Date(T0.getTime() + 90_000) }],
    ],
    [
      'a passed probe closes a HALF_OPEN pair',
      [row('COMPLETE')],
      [record(A, 'HALF_OPEN', 2, T0)],
      90_000,
      [{ state: 'CLOSED', consecutiveFailures: 0, openedAt: null }],
    ],
  ];
  it.each(rows)('%s', (_, outcomes, loaded, elapsed, expected) => {
    const now = new Date(T0.getTime() + elapsed);
    const writes = planBreakerPass({ rows: outcomes, loaded, now, policy: POLICY });
    expect(writes).toHaveLength(expected.length);
    expected.forEach((e, i) => {
      expect(writes[i]).toMatchObject({ kind: LTA, updatedAt: now, ...e });
    });
  });

  it('the pairs to load are those with an outcome, once each', () => {
    expect(breakerPairs([row('FAIL', A), row(null), row('COMPLETE', A), row('FAIL', B)])).toEqual([
      { kind: LTA, locationId: A },
      { kind: LTA, locationId: B },
    ]);
  });
});

describe('reportBreakerWrites', () => {
  const write = (state: CircuitState): CircuitBreakerWrite => ({
    kind: LTA,
    locationId: A,
    expectedVersion: 7,
    state,
    consecutiveFailures: 2,
    openedAt: state === 'CLOSED' ? null : T0,
    lastFailure: null,
    updatedAt: T0,
  });
  const rows: [string, CircuitState | undefined, CircuitState, string | undefined, boolean][] = [
    [
      'CLOSED → OPEN warns',
      'CLOSED',
      'OPEN',
      'WARNING circuit breaker opened; scheduling parked for the pair',
      false,
    ],
    [
      'a new pair opening at once warns',
      undefined,
      'OPEN',
      'WARNING circuit breaker opened; scheduling parked for the pair',
      false,
    ],
    [
      'HALF_OPEN → OPEN warns that the probe failed',
      'HALF_OPEN',
      'OPEN',
      'WARNING circuit breaker probe failed; re-opened, scheduling stays parked for the pair',
      false,
    ],
    [
      'OPEN → HALF_OPEN releases one probe',
      'OPEN',
      'HALF_OPEN',
      'INFO circuit breaker half-open; letting one probe through',
      true,
    ],
    [
      'HALF_OPEN → CLOSED releases the pair',
      'HALF_OPEN',
      'CLOSED',
      'INFO circuit breaker closed; scheduling resumed for the pair',
      true,
    ],
    ['a count change within CLOSED says nothing', 'CLOSED', 'CLOSED', undefined, false],
  ];
  it.each(rows)('%s', (_, from, to, line, released) => {
    const loaded = from === undefined ? [] : [record(A, from, 1, from === 'CLOSED' ? null : T0)];
    const report = reportBreakerWrites({
      written: [asView(write(to))],
      planned: 1,
      loaded,
      policy: POLICY,
    });
    expect(report.lines.map((l) => `${l.level} ${l.message}`)).toEqual(
      line === undefined ? [] : [line],
    );
    expect(report.released).toBe(released);
  });

  it('rows that moved under the pass (an operator reset) are mentioned at DEBUG', () => {
    const report = reportBreakerWrites({ written: [], planned: 2, loaded: [], policy: POLICY });
    expect(report.lines).toEqual([
      {
        level: 'DEBUG',
        message: 'circuit breaker rows moved during the pass (operator reset?)',
        fields: { skipped: 2 },
      },
    ]);
  });
});

describe('TransitionCursor', () => {
  it('advances over what it read and asks again for the ids it stepped over, for the grace period', () => {
    const cursor = new TransitionCursor();
    expect(cursor.started).toBe(false);
    cursor.start(10);
    cursor.advance([11, 14], 0);
    expect(cursor.after).toBe(14);
    expect(cursor.gaps(0)).toEqual([12, 13]);
    cursor.advance([13], 5); // committed late: counted once, no longer a gap
    expect(cursor.after).toBe(14);
    expect(cursor.gaps(5)).toEqual([12]);
    cursor.advance([14, 15], 6); // an id read twice is not counted again
    expect(cursor.after).toBe(15);
    expect(cursor.gaps(LATE_COMMIT_GRACE_MS)).toEqual([12]);
    expect(cursor.gaps(LATE_COMMIT_GRACE_MS + 1)).toEqual([]); // given up (rolled back)
  });
});

/** Breaker rows in memory, with the repository's compare-and-set rule. */
function memoryBreakers(outcomes: TransitionOutcome[]) {
  const rows = new Map<string, CircuitBreakerView>();
  const repo: BreakerRepository = {
    latestTransitionId: async () => 0,
    readOutcomes: async (after, gaps) => {
      const read = outcomes.filter((o) => o.id > after || gaps.includes(o.id));
      return { ids: read.map((o) => o.id), outcomes: read.filter((o) => o.outcome !== null) };
    },
    loadForPass: async (pairs) =>
      [...rows.values()].filter(
        (r) =>
          r.state !== 'CLOSED' ||
          pairs.some((p) => p.kind === r.kind && p.locationId === r.locationId),
      ),
    write: async (writes) =>
      writes.flatMap((w) => {
        const key = `${w.kind}|${w.locationId}`;
        if ((rows.get(key)?.version ?? null) !== w.expectedVersion) return [];
        const v = asView(w);
        rows.set(key, v);
        return [v];
      }),
  };
  return { repo, state: () => rows.get(`${LTA}|${A}`)?.state };
}

describe('the breaker loop on a simulated clock', () => {
  it('opens on failures, half-opens exactly one cooldown later (within a pass interval), and wakes the scheduler', async () => {
    const clock = new SimulatedClock(T0.getTime());
    const outcomes: TransitionOutcome[] = [];
    const mem = memoryBreakers(outcomes);
    let released = 0;
    const loop = startCircuitBreakerLoop({
      database: {} as Executor,
      repository: mem.repo,
      clock,
      logger: memoryLogger(),
      policy: POLICY,
      batchSize: 100,
      intervalMs: 1_000,
      onRelease: () => released++,
    });
    await clock.advance(0);
    outcomes.push({ ...row('FAIL'), id: 1 }, { ...row('FAIL'), id: 2 });
    await clock.advance(1_000);
    expect(mem.state()).toBe('OPEN');
    const opened = clock.now();
    await clock.advance(POLICY.cooldownMs - 1_000);
    expect(mem.state()).toBe('OPEN');
    expect(released).toBe(0);
    await clock.advance(1_000);
    expect(mem.state()).toBe('HALF_OPEN');
    expect(clock.now() - opened).toBe(POLICY.cooldownMs);
    expect(released).toBe(1);
    outcomes.push({ ...row('COMPLETE'), id: 3 });
    await clock.advance(1_000);
    expect(mem.state()).toBe('CLOSED');
    expect(released).toBe(2);
    await loop.stop();
  });
});
