import { describe, expect, it } from 'vitest';
import {
  type AttentionOperationRow,
  classifyArchive,
  classifyBreaker,
  classifyCopy,
  classifyOperation,
  classifyWaitingEntry,
  formatAge,
  type HeartbeatFacts,
  heartbeatFacts,
  heldKey,
  sortAttention,
} from '../../machines/attention.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';

const NOW = Date.parse('2026-11-30T12:00:00Z');
const timing = {
  heartbeatTimeoutMs: 300_000,
  reconcilerFloorMs: 3_600_000,
  deadlines: DEFAULT_DEADLINES_MS,
};
const ago = (ms: number) => new Date(NOW - ms);
const MIN = 60_000;
const HOUR = 60 * MIN;
const ID = '11111111-1111-4111-8111-111111111111';

function row(over: Partial<AttentionOperationRow> & { status: OperationStatus }) {
  return {
    id: ID,
    kind: OperationKind.LONG_TERM_ARCHIVE,
    attempt: 1,
    retryCount: 0,
    maxRetries: 3,
    since: ago(1_000),
    workerId: null,
    lastError: null,
    parked: false,
    deadlineMs: null,
    ...over,
  } satisfies AttentionOperationRow;
}

/** A worker holding attempt `attempt` (default 1) beat `ms` ago. */
const beats = (ms: number, attempt = 1): HeartbeatFacts =>
  new Map([[heldKey(ID, attempt), NOW - ms]]);
const none: HeartbeatFacts = new Map();

describe('attention rules', () => {
  // [what, row, heartbeats, expected categories]
  const cases: [string, AttentionOperationRow, HeartbeatFacts, string[]][] = [
    ['PENDING due just now', row({ status: 'PENDING' }), none, []],
    [
      'PENDING due for longer than the floor',
      row({ status: 'PENDING', since: ago(61 * MIN) }),
      none,
      ['stuck'],
    ],
    [
      'PENDING past the floor but parked by a breaker',
      row({ status: 'PENDING', since: ago(61 * MIN), parked: true }),
      none,
      [],
    ],
    ['SCHEDULED within the floor', row({ status: 'SCHEDULED', since: ago(59 * MIN) }), none, []],
    [
      'SCHEDULED past the floor',
      row({ status: 'SCHEDULED', since: ago(61 * MIN) }),
      none,
      ['stuck'],
    ],
    [
      'SCHEDULED past the floor with a live heartbeat',
      row({ status: 'SCHEDULED', since: ago(61 * MIN) }),
      beats(10_000),
      [],
    ],
    [
      'SCHEDULED ten minutes, held by a worker whose heartbeat went stale',
      row({ status: 'SCHEDULED', since: ago(10 * MIN) }),
      beats(6 * MIN),
      ['stuck'],
    ],
    [
      'SCHEDULED ten minutes, held by no worker (within the floor)',
      row({ status: 'SCHEDULED', since: ago(10 * MIN) }),
      none,
      [],
    ],
    [
      'IN_PROGRESS whose only beat holds an older attempt (the reconciler’s case, within the floor)',
      row({ status: 'IN_PROGRESS', since: ago(10 * MIN), attempt: 2, retryCount: 1 }),
      beats(6 * MIN, 1),
      [],
    ],
    [
      'IN_PROGRESS beating for hours',
      row({ status: 'IN_PROGRESS', since: ago(300 * MIN) }),
      beats(10_000),
      [],
    ],
    [
      'IN_PROGRESS with a stale heartbeat past the timeout',
      row({ status: 'IN_PROGRESS', since: ago(6 * MIN) }),
      beats(5.5 * MIN),
      ['stuck'],
    ],
    [
      'IN_PROGRESS with a stale heartbeat, started within the timeout',
      row({ status: 'IN_PROGRESS', since: ago(4 * MIN) }),
      beats(5.5 * MIN),
      [],
    ],
    [
      'IN_PROGRESS, no heartbeat, within the floor',
      row({ status: 'IN_PROGRESS', since: ago(30 * MIN) }),
      none,
      [],
    ],
    [
      'IN_PROGRESS, no heartbeat, past the floor',
      row({ status: 'IN_PROGRESS', since: ago(61 * MIN) }),
      none,
      ['stuck'],
    ],
    [
      'IN_PROGRESS past the floor, heartbeats not visible',
      row({ status: 'IN_PROGRESS', since: ago(61 * MIN) }),
      null,
      ['stuck'],
    ],
    [
      'IN_PROGRESS within the floor, heartbeats not visible',
      row({ status: 'IN_PROGRESS', since: ago(59 * MIN) }),
      null,
      [],
    ],
    [
      'IN_PROGRESS, beating, within 80 % of its kind’s deadline (24 h)',
      row({ status: 'IN_PROGRESS', since: ago(19 * 60 * MIN) }),
      beats(10_000),
      [],
    ],
    [
      'IN_PROGRESS, beating, past 80 % of its kind’s deadline',
      row({ status: 'IN_PROGRESS', since: ago(20 * 60 * MIN) }),
      beats(10_000),
      ['deadline'],
    ],
    [
      'IN_PROGRESS, beating, past its own deadline',
      row({ status: 'IN_PROGRESS', since: ago(11 * MIN), deadlineMs: 10 * MIN }),
      beats(10_000),
      ['deadline'],
    ],
    [
      'IN_PROGRESS, its own deadline far off although its kind’s has passed',
      row({ status: 'IN_PROGRESS', since: ago(25 * 60 * MIN), deadlineMs: 7 * 24 * 60 * MIN }),
      beats(10_000),
      [],
    ],
    [
      'IN_PROGRESS past its deadline and past the floor with no heartbeat: stuck too',
      row({ status: 'IN_PROGRESS', since: ago(61 * MIN), deadlineMs: 60 * MIN }),
      none,
      ['stuck', 'deadline'],
    ],
    [
      'SCHEDULED longer than a deadline: not running, no deadline',
      row({ status: 'SCHEDULED', since: ago(30 * MIN), deadlineMs: 10 * MIN }),
      beats(10_000),
      [],
    ],
    ['live with retries left', row({ status: 'PENDING', retryCount: 2 }), none, []],
    [
      'live at the retry cap',
      row({ status: 'SCHEDULED', retryCount: 3, attempt: 4 }),
      none,
      ['retry_cap'],
    ],
    [
      'a fresh operation with no retries allowed is not at the cap',
      row({ status: 'PENDING', maxRetries: 0 }),
      none,
      [],
    ],
    [
      'stuck and at the cap',
      row({ status: 'SCHEDULED', retryCount: 3, since: ago(61 * MIN) }),
      none,
      ['stuck', 'retry_cap'],
    ],
    [
      'FAILED',
      row({ status: 'FAILED', lastError: { message: 'checksum mismatch', retryable: false } }),
      none,
      ['failed'],
    ],
    [
      'FAILED by an operator cancel',
      row({
        status: 'FAILED',
        lastError: { message: 'cancelled: x', retryable: false, code: 'CANCELLED' },
      }),
      none,
      [],
    ],
    [
      'FAILED with its budget spent',
      row({
        status: 'FAILED',
        retryCount: 3,
        lastError: { message: 'reset', retryable: false, code: 'RETRIES_EXHAUSTED' },
      }),
      none,
      ['failed'],
    ],
    ['COMPLETED', row({ status: 'COMPLETED', since: ago(600 * MIN) }), none, []],
  ];

  it.each(cases)('%s', (_what, r, heartbeats, expected) => {
    const items = classifyOperation(r, { now: NOW, timing, heartbeats });
    expect(items.map((i) => i.category)).toEqual(expected);
    for (const i of items) {
      expect(i.subject).toEqual({ type: 'operation', id: ID });
      expect(i.why.length).toBeGreaterThan(20);
    }
  });

  it('says why in words an operator can act on', () => {
    const [stale] = classifyOperation(
      row({ status: 'IN_PROGRESS', since: ago(6 * MIN), workerId: 'worker-7' }),
      { now: NOW, timing, heartbeats: beats(5.5 * MIN) },
    );
    expect(stale?.why).toMatch(
      /IN_PROGRESS on worker-7 and held by a worker whose last heartbeat was 6 min ago \(timeout 5 min\)/,
    );
    const [failed] = classifyOperation(
      row({ status: 'FAILED', attempt: 2, lastError: { message: 'disk full', retryable: false } }),
      { now: NOW, timing, heartbeats: none },
    );
    expect(failed?.why).toMatch(/FAILED at attempt 2: disk full/);
    const [near] = classifyOperation(
      row({ status: 'IN_PROGRESS', since: ago(50 * MIN), workerId: 'worker-7', deadlineMs: HOUR }),
      { now: NOW, timing, heartbeats: beats(10_000) },
    );
    expect(near?.why).toBe(
      'IN_PROGRESS on worker-7 at attempt 1 for 50 min, 83 % of its deadline of 1 h (set at submit): at the deadline its handler is aborted and the deadline path resets it; check what the handler waits on (a storage or tape call that does not return?)',
    );
    const [past] = classifyOperation(
      row({ status: 'IN_PROGRESS', since: ago(25 * HOUR), workerId: 'worker-7' }),
      { now: NOW, timing, heartbeats: beats(10_000) },
    );
    expect(past?.why).toBe(
      "IN_PROGRESS on worker-7 at attempt 1 for 25.0 h, past its deadline of 24 h (long_term_archive's) by 60 min; the deadline path should have reset it: is a control-plane leader running?",
    );
  });

  const breaker = {
    kind: OperationKind.LONG_TERM_ARCHIVE,
    locationId: ID,
    location: 'cologne/lta',
    consecutiveFailures: 5,
    openedAt: ago(MIN),
    lastFailureMessage: 'archive unreachable',
    parked: 7,
  };
  it.each([
    ['CLOSED', null],
    ['OPEN', 'breaker_open'],
    ['HALF_OPEN', 'breaker_open'],
  ])('a %s breaker → %s', (state, expected) => {
    const item = classifyBreaker({ ...breaker, state });
    expect(item?.category ?? null).toBe(expected);
    if (item !== null) {
      expect(item.why).toContain('7 PENDING parked');
      expect(item.why).toContain(`opstate breaker reset long_term_archive ${ID}`);
    }
  });

  const copy = {
    id: ID,
    artifactType: 'raw_data_package',
    artifactId: ID,
    location: 'cologne/buffer',
    deletionFailureCount: 2,
    lastError: 'interrupted 2 times',
    since: ago(MIN),
    archiveOperationId: ID,
    kept: [] as { name: string; reason: string | null }[],
    holder: 'deleter-1',
  };
  // [what, copy, expected category]
  const copies: [string, Parameters<typeof classifyCopy>[0], string | null][] = [
    ['PRESENT', { ...copy, status: 'PRESENT' }, null],
    ['DELETION_SCHEDULED', { ...copy, status: 'DELETION_SCHEDULED' }, null],
    ['DELETED', { ...copy, status: 'DELETED' }, null],
    ['DELETION_FAILED, interrupted', { ...copy, status: 'DELETION_FAILED' }, 'deletion_failed'],
    [
      'DELETION_FAILED, members kept',
      { ...copy, status: 'DELETION_FAILED', kept: [{ name: 'a.fits', reason: 'open by pid 7' }] },
      'deletion_failed',
    ],
    [
      'in progress, lease running',
      { ...copy, status: 'DELETION_IN_PROGRESS', since: ago(-MIN) },
      null,
    ],
    [
      'in progress, lease just lapsed',
      { ...copy, status: 'DELETION_IN_PROGRESS', since: ago(MIN) },
      null,
    ],
    [
      'in progress, lapsed past the heartbeat timeout',
      { ...copy, status: 'DELETION_IN_PROGRESS', since: ago(6 * MIN) },
      'deletion_stalled',
    ],
  ];
  it.each(copies)('a copy %s', (_what, c, expected) => {
    expect(classifyCopy(c, { now: NOW, timing })?.category ?? null).toBe(expected);
  });

  it('a blocked deletion names every kept member and its reason, and how to re-plan', () => {
    const item = classifyCopy(
      {
        ...copy,
        status: 'DELETION_FAILED',
        kept: [
          { name: 'a.fits', reason: 'open by pid 7' },
          { name: 'b.fits', reason: 'tracked by git' },
        ],
      },
      { now: NOW, timing },
    );
    expect(item?.why).toMatch(
      /is blocked, the copy is kept: 2 member\(s\) kept — a.fits: open by pid 7; b.fits: tracked by git/,
    );
    expect(item?.why).toContain(`opstate retry ${ID} --replan`);
  });

  const archive = {
    operationId: ID,
    kind: OperationKind.LONG_TERM_ARCHIVE,
    status: 'FAILED' as const,
    archiveKey: 'rdp-1.tar',
    since: ago(MIN),
    lastError: null,
  };
  it.each([
    ['CONFLICT', 'archive_conflict', /another object is at the archive key rdp-1.tar/],
    ['VERIFY_FAILED', 'archive_conflict', /does not read back as written/],
    ['VERIFIED', null, null],
    ['UPLOADED', null, null],
  ])('an archive whose last state is %s → %s', (archiveState, expected, why) => {
    const item = classifyArchive({ ...archive, archiveState });
    expect(item?.category ?? null).toBe(expected);
    if (why !== null) expect(item?.why).toMatch(why);
  });

  it('sorts by category, then oldest first (failures newest first)', () => {
    const failedOld = classifyOperation(row({ status: 'FAILED', since: ago(100 * MIN), id: ID }), {
      now: NOW,
      timing,
      heartbeats: none,
    });
    const stuckNew = classifyOperation(row({ status: 'SCHEDULED', since: ago(61 * MIN) }), {
      now: NOW,
      timing,
      heartbeats: none,
    });
    const stuckOld = classifyOperation(row({ status: 'SCHEDULED', since: ago(90 * MIN) }), {
      now: NOW,
      timing,
      heartbeats: none,
    });
    const failedNew = classifyOperation(row({ status: 'FAILED', since: ago(5 * MIN), id: ID }), {
      now: NOW,
      timing,
      heartbeats: none,
    });
    const sorted = sortAttention([...failedOld, ...stuckNew, ...failedNew, ...stuckOld]);
    expect(sorted.map((i) => [i.category, i.since])).toEqual([
      ['stuck', ago(90 * MIN).toISOString()],
      ['stuck', ago(61 * MIN).toISOString()],
      ['failed', ago(5 * MIN).toISOString()],
      ['failed', ago(100 * MIN).toISOString()],
    ]);
  });

  it('folds worker heartbeats into the newest beat per held attempt', () => {
    const facts = heartbeatFacts([
      { at: 5, held: [{ operationId: 'a', attempt: 1 }] },
      {
        at: 9,
        held: [
          { operationId: 'a', attempt: 1 },
          { operationId: 'b', attempt: 2 },
        ],
      },
      { at: 7, held: [{ operationId: 'a', attempt: 2 }] },
    ]);
    expect([...facts].sort()).toEqual([
      ['a:1', 9],
      ['a:2', 7],
      ['b:2', 9],
    ]);
  });

  it('formats ages at a glance', () => {
    expect([0, 95_000, 12 * MIN, 3.5 * 60 * MIN, 2 * 24 * 60 * MIN].map(formatAge)).toEqual([
      '0 s',
      '95 s',
      '12 min',
      '3.5 h',
      '2.0 d',
    ]);
  });
});

describe('a declared package waiting on a file', () => {
  const row = {
    rawDataPackageId: '0190c3d2-0000-7000-8000-00000000e001',
    packageName: 'obs-7',
    location: 'obs/source',
    declaredAt: new Date('2026-01-02T03:04:05Z'),
    files: 3,
    missing: 1,
    firstMissing: { id: '0190c3d2-0000-7000-8000-00000000f001', name: 'scan_2.fits' },
  };
  it('names the package, the location and the file, and what brings it back', () => {
    expect(classifyWaitingEntry(row)).toEqual({
      category: 'entry_waiting',
      subject: { type: 'package', id: row.rawDataPackageId },
      kind: OperationKind.RAW_DATA_PACKAGE,
      state: 'WAITING',
      since: '2026-01-02T03:04:05.000Z',
      why: "raw data package obs-7's files were declared complete at obs/source, but file scan_2.fits (0190c3d2-0000-7000-8000-00000000f001) has no PRESENT copy there any more; register its copy there again: the pipeline creates its packaging once every file has one",
    });
  });
  it('says how many more are missing', () => {
    expect(classifyWaitingEntry({ ...row, missing: 3 }).why).toContain(
      'file scan_2.fits (0190c3d2-0000-7000-8000-00000000f001) and 2 more of its 3 have no PRESENT copy',
    );
  });
});
