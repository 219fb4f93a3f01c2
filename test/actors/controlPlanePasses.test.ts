import { describe, expect, it } from 'vitest';
import { barrierRefusals } from '../../control-plane/ControlPlane.ts';
import { findAbandoned } from '../../control-plane/findAbandoned.ts';
import {
  barrierDue,
  planRelay,
  relayGraceMs,
  relayPassedTo,
  schedulingLimit,
  settledBarrier,
  sortPublished,
} from '../../control-plane/planDispatch.ts';
import {
  planMonitorResets,
  planStrandedResets,
  staleSuspects,
} from '../../control-plane/planMonitorPass.ts';
import { planReconcilerResets, spareWaiting } from '../../control-plane/planReconcilerPass.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { ActiveOperation } from '../../persistence/ActiveOperation.ts';
import type { ScheduledTransition } from '../../persistence/OutboxEntry.ts';
import type { WorkerHeartbeat } from '../../transport/Transport.ts';

const KIND = OperationKind.UNPACK;
const NOW = Date.UTC(2030, 0, 1, 12);
const TIMEOUT = 10_000;
const GRACE = 1_500;
const beat = (workerId: string, ageMs: number, held: [string, number][]): WorkerHeartbeat => ({
  workerId,
  at: NOW - ageMs,
  held: held.map(([operationId, attempt]) => ({ kind: KIND, operationId, attempt })),
});
const op = (
  id: string,
  status: OperationStatus,
  attempt = 1,
  workerId: string | null = status === 'IN_PROGRESS' ? 'a' : null,
) => ({ id, kind: KIND, status, attempt, workerId });

describe('schedulingLimit', () => {
  const rows: [string, number, number, number, number][] = [
    ['an empty broker takes a full batch', 0, 1000, 256, 256],
    ['room for less than a batch takes what fits', 900, 1000, 256, 100],
    ['a full broker takes none', 1000, 1000, 256, 0],
    ['over the cap (an operator lowered it) takes none', 1200, 1000, 256, 0],
  ];
  it.each(rows)('%s', (_, scheduled, maxScheduled, batchSize, limit) => {
    expect(schedulingLimit({ scheduled, maxScheduled, batchSize })).toBe(limit);
  });
});

describe('planRelay', () => {
  const row = (id: number, ageMs: number): ScheduledTransition => ({
    id,
    operationId: `op-${id}`,
    attempt: 1,
    at: new Date(NOW - ageMs),
  });
  // name, rows read, batch size, scheduler's publishes, to load, passed, cursor to, more
  const rows: [
    string,
    ScheduledTransition[],
    number,
    string[],
    number[],
    string[],
    number,
    boolean,
  ][] = [
    ['nothing past the cursor: it moves to the barrier', [], 2, [], [], [], 90, false],
    [
      'a dispatch younger than the grace (another clock) stops the cursor before it',
      [row(3, 5_000), row(7, 999), row(9, 5_000)],
      4,
      [],
      [3],
      [],
      6,
      false,
    ],
    [
      'old dispatches are loaded to publish and the cursor passes them up to the barrier',
      [row(1, 1_000), row(2, 5_000)],
      3,
      [],
      [1, 2],
      [],
      90,
      false,
    ],
    [
      'what the scheduler published is passed over, and forgotten',
      [row(1, 5_000), row(2, 5_000)],
      3,
      ['op-2:1', 'op-5:1'],
      [1],
      ['op-2:1'],
      90,
      false,
    ],
    [
      'a full batch moves the cursor to its last row and says there is more',
      [row(1, 5_000), row(2, 5_000)],
      2,
      ['op-1:1'],
      [2],
      ['op-1:1'],
      2,
      true,
    ],
  ];
  it.each(rows)('%s', (_, read, limit, sent, load, passed, upTo, more) => {
    const plan = planRelay({
      rows: read,
      upTo: 90,
      now: NOW,
      graceMs: 1_000,
      limit,
      published: new Set(sent),
    });
    expect(plan.load).toEqual(load);
    expect(plan.passed).toEqual(passed);
    expect(plan.upTo).toBe(upTo);
    expect(plan.more).toBe(more);
    // Everything published: the cursor moves as planned.
    const out = plan.load.map((id) => ({ id }));
    expect(
      relayPassedTo(
        plan,
        out,
        out.map(() => ({ ok: true, duplicate: false })),
      ),
    ).toBe(upTo);
  });

  it('a failed publish holds the cursor just before it, whatever went out after it', () => {
    const plan = planRelay({
      rows: [row(4, 5_000), row(6, 5_000), row(8, 5_000)],
      upTo: 90,
      now: NOW,
      graceMs: 1_000,
      limit: 10,
      published: new Set(),
    });
    const sent = plan.load.map((id) => ({ id }));
    const failed = { ok: false as const, error: new Error('no responders') };
    const ok = { ok: true as const, duplicate: false };
    expect(relayPassedTo(plan, sent, [ok, failed, ok])).toBe(5);
    expect(relayPassedTo(plan, sent, [failed, ok, ok])).toBe(3);
    // A stale dispatch was not sent: the cursor passes it with the rest.
    expect(relayPassedTo(plan, [{ id: 4 }, { id: 8 }], [ok, ok])).toBe(90);
  });

  it('reads up to the newest barrier at least the grace old, and keeps the later ones', () => {
    const barriers = [
      { at: NOW - 3_000, upTo: 10 },
      { at: NOW - 1_500, upTo: 20 },
      { at: NOW - 999, upTo: 30 },
      { at: NOW, upTo: 40 },
    ];
    expect(settledBarrier(barriers, NOW, 1_000)).toEqual({
      upTo: 20,
      keep: barriers.slice(2),
    });
    expect(settledBarrier(barriers.slice(2), NOW, 1_000)).toEqual({
      upTo: undefined,
      keep: barriers.slice(2),
    });
    expect(settledBarrier([], NOW, 1_000)).toEqual({ upTo: undefined, keep: [] });
  });

  it('takes a barrier when it holds none or its newest is a quarter of the grace old', () => {
    expect(barrierDue([], NOW, 1_000)).toBe(true);
    expect(
      barrierDue(
        [
          { at: NOW - 2_000, upTo: 1 },
          { at: NOW - 249, upTo: 2 },
        ],
        NOW,
        1_000,
      ),
    ).toBe(false);
    expect(barrierDue([{ at: NOW - 250, upTo: 2 }], NOW, 1_000)).toBe(true);
  });

  it('a barrier refused for 30 s is said once, and its grant again once', () => {
    const logger = memoryLogger();
    const refused = barrierRefusals(logger);
    refused.note(true, 0);
    refused.note(true, 29_999);
    expect(logger.lines).toEqual([]);
    refused.note(true, 30_000);
    refused.note(true, 60_000);
    expect(logger.lines.map((l) => [l.level, l.fields])).toEqual([
      ['WARNING', { refusedForMs: 30_000 }],
    ]);
    refused.note(false, 61_000);
    refused.note(false, 62_000);
    expect(logger.lines.map((l) => l.level)).toEqual(['WARNING', 'INFO']);
    // A refusal that ends before the 30 s says nothing.
    refused.note(true, 70_000);
    refused.note(false, 80_000);
    expect(logger.lines).toHaveLength(2);
  });

  it('the grace is four relay intervals, at least a second', () => {
    expect([10, 250, 1_000].map(relayGraceMs)).toEqual([1_000, 1_000, 4_000]);
  });
});

describe('sortPublished', () => {
  const d = (attempt: number) => ({
    route: defaultRoute(KIND),
    payload: {
      operationId: 'x',
      kind: KIND,
      operationType: defaultRoute(KIND).operationType,
      attempt,
    },
  });
  it('names the dispatches that went out, counts those that failed and warns once naming the first error', () => {
    const noResponders = new Error('no responders');
    const r = sortPublished(
      [d(1), d(2), d(3), d(4)],
      [
        { ok: true, duplicate: false },
        { ok: false, error: noResponders },
        { ok: true, duplicate: true },
        { ok: false, error: new Error('timeout') },
      ],
      'scheduler',
    );
    expect(r.sent).toEqual(['x:1', 'x:3']);
    expect(r.failed).toBe(2);
    expect(r.lines).toEqual([
      {
        level: 'WARNING',
        message: 'scheduler could not publish some dispatches; the relay retries them',
        fields: { failed: 2, err: noResponders },
      },
    ]);
  });
  it('all published: every one named, nothing said', () => {
    const r = sortPublished(
      [d(1), d(2)],
      [
        { ok: true, duplicate: false },
        { ok: true, duplicate: false },
      ],
      'relay',
    );
    expect(r).toEqual({ sent: ['x:1', 'x:2'], failed: 0, lines: [] });
  });
});

describe('heartbeat monitor decisions', () => {
  it('only operations listed by a stale heartbeat are suspects, each once', () => {
    const beats = [
      beat('a', TIMEOUT, [
        ['x', 1],
        ['y', 1],
      ]),
      beat('b', TIMEOUT - 1, [['z', 1]]),
      beat('c', 60_000, [['x', 1]]),
    ];
    expect(staleSuspects(beats, NOW, TIMEOUT)).toEqual(['x', 'y']);
  });

  const rows: [string, WorkerHeartbeat[], ReturnType<typeof op>, boolean][] = [
    [
      'IN_PROGRESS held only by a stale heartbeat: reset',
      [beat('a', TIMEOUT, [['x', 1]])],
      op('x', 'IN_PROGRESS'),
      true,
    ],
    [
      'SCHEDULED (pulled, not started) held only by a stale heartbeat: reset',
      [beat('a', TIMEOUT, [['x', 1]])],
      op('x', 'SCHEDULED'),
      true,
    ],
    [
      'stale by a millisecond less than the timeout: alive',
      [beat('a', TIMEOUT - 1, [['x', 1]])],
      op('x', 'IN_PROGRESS'),
      false,
    ],
    [
      'SCHEDULED held by a stale and a fresh heartbeat: alive (no START says whose it is)',
      [beat('a', TIMEOUT, [['x', 1]]), beat('b', 0, [['x', 1]])],
      op('x', 'SCHEDULED'),
      false,
    ],
    [
      'IN_PROGRESS on a, whose heartbeat is stale, listed by fresh b: reset (b did not start it)',
      [beat('a', TIMEOUT, [['x', 1]]), beat('b', 0, [['x', 1]])],
      op('x', 'IN_PROGRESS', 1, 'a'),
      true,
    ],
    [
      'IN_PROGRESS on b, whose fresh heartbeat lists it, also listed by stale a: alive',
      [beat('a', TIMEOUT, [['x', 1]]), beat('b', 0, [['x', 1]])],
      op('x', 'IN_PROGRESS', 1, 'b'),
      false,
    ],
    [
      'IN_PROGRESS on c, whose fresh heartbeat no longer lists it, listed by stale a and fresh b: reset',
      [beat('a', TIMEOUT, [['x', 1]]), beat('b', 0, [['x', 1]]), beat('c', 0, [['y', 1]])],
      op('x', 'IN_PROGRESS', 1, 'c'),
      true,
    ],
    [
      'IN_PROGRESS on c, listed only by fresh b: no news of a death, the reconciler’s',
      [beat('b', 0, [['x', 1]])],
      op('x', 'IN_PROGRESS', 1, 'c'),
      false,
    ],
    [
      'IN_PROGRESS with no worker recorded: any fresh heartbeat keeps it, as before',
      [beat('a', TIMEOUT, [['x', 1]]), beat('b', 0, [['x', 1]])],
      op('x', 'IN_PROGRESS', 1, null),
      false,
    ],
    [
      'listed by no heartbeat: not the monitor’s (the reconciler’s floor)',
      [beat('a', TIMEOUT, [['y', 1]])],
      op('x', 'IN_PROGRESS'),
      false,
    ],
    [
      'listed at another attempt: not this attempt’s holder',
      [beat('a', TIMEOUT, [['x', 1]])],
      op('x', 'IN_PROGRESS', 2),
      false,
    ],
    [
      'already PENDING again: nothing to do',
      [beat('a', TIMEOUT, [['x', 1]])],
      op('x', 'PENDING'),
      false,
    ],
    ['COMPLETED: nothing to do', [beat('a', TIMEOUT, [['x', 1]])], op('x', 'COMPLETED'), false],
  ];
  it.each(rows)('%s', (_, beats, operation, reset) => {
    const found = findAbandoned({ now: NOW, timeoutMs: TIMEOUT, beats, operations: [operation] });
    expect(found.map((f) => f.id)).toEqual(reset ? ['x'] : []);
  });

  it('a reset names the workers, how stale, and is fenced on the attempt judged dead', () => {
    const [r] = planMonitorResets({
      now: NOW,
      timeoutMs: TIMEOUT,
      beats: [beat('w-1', 12_000, [['x', 3]]), beat('w-2', 11_000, [['x', 3]])],
      operations: [op('x', 'SCHEDULED', 3)],
    });
    expect(r?.event).toEqual({
      type: 'RESET',
      by: 'heartbeat_monitor',
      attempt: 3,
      at: new Date(NOW).toISOString(),
      reason:
        'stale heartbeat: dispatch held by w-1, w-2, whose last heartbeat was 11 s ago (timeout 10 s)',
    });
    expect(r?.line).toMatchObject({ level: 'INFO', message: 'heartbeat monitor reset operation' });
    expect(r?.line.fields).toMatchObject({
      operationId: 'x',
      workerIds: ['w-1', 'w-2'],
      attempt: 3,
    });
  });

  it('a reset of a running operation names the worker that started it and who else listed it', () => {
    const [r] = planMonitorResets({
      now: NOW,
      timeoutMs: TIMEOUT,
      beats: [beat('w-1', 12_000, [['x', 3]]), beat('w-2', 0, [['x', 3]])],
      operations: [op('x', 'IN_PROGRESS', 3, 'w-1')],
    });
    expect(r?.event.reason).toBe(
      'stale heartbeat: running on w-1, whose last heartbeat was 12 s ago (timeout 10 s); also listed by w-2, which did not start it',
    );
    expect(r?.line.fields).toMatchObject({ workerIds: ['w-1'] });
  });
});

describe('stranded dispatch decisions', () => {
  const waiting = (id: string, ageMs: number, attempt = 1, status: OperationStatus = 'SCHEDULED') =>
    ({
      id,
      kind: KIND,
      status,
      attempt,
      scheduledAt: new Date(NOW - ageMs),
      startedAt: null,
      since: new Date(NOW - ageMs),
      workerId: null,
    }) as ActiveOperation;
  const out = (operationId: string, attempt = 1) => ({
    operationId,
    kind: KIND,
    operationType: defaultRoute(KIND).operationType,
    attempt,
  });
  const rows: [string, WorkerHeartbeat[], ActiveOperation, boolean][] = [
    [
      'handed out, listed by no heartbeat, past the timeout: reset',
      [],
      waiting('x', TIMEOUT),
      true,
    ],
    [
      'handed out but scheduled less than the timeout ago: not yet',
      [],
      waiting('x', TIMEOUT - 1),
      false,
    ],
    [
      'listed by a fresh heartbeat: a live worker holds it',
      [beat('a', 0, [['x', 1]])],
      waiting('x', TIMEOUT),
      false,
    ],
    [
      'listed by a stale heartbeat: the first look’s case',
      [beat('a', TIMEOUT, [['x', 1]])],
      waiting('x', TIMEOUT),
      false,
    ],
    [
      'the handed-out dispatch is of an older attempt: this one waits in the queue',
      [],
      waiting('x', TIMEOUT, 2),
      false,
    ],
    [
      'IN_PROGRESS: not a dispatch waiting for a worker',
      [],
      waiting('x', TIMEOUT, 1, 'IN_PROGRESS'),
      false,
    ],
  ];
  it.each(rows)('%s', (_, beats, op, reset) => {
    const { resets } = planStrandedResets({
      now: NOW,
      timeoutMs: TIMEOUT,
      graceMs: GRACE,
      beats,
      waiting: [op],
      unsettled: [out('x')],
      seen: new Map([[`x:${op.attempt}`, NOW - GRACE]]),
    });
    expect(resets.map((r) => r.id)).toEqual(reset ? ['x'] : []);
  });

  it('a first sighting only marks it; a later look at least the grace after the mark resets it', () => {
    const input = {
      timeoutMs: TIMEOUT,
      graceMs: GRACE,
      beats: [],
      waiting: [waiting('x', TIMEOUT)],
      unsettled: [out('x')],
    };
    const first = planStrandedResets({ ...input, now: NOW, seen: new Map() });
    expect(first.resets).toEqual([]);
    expect([...first.seen]).toEqual([['x:1', NOW]]);
    const early = planStrandedResets({ ...input, now: NOW + GRACE - 1, seen: first.seen });
    expect(early.resets).toEqual([]);
    expect([...early.seen]).toEqual([['x:1', NOW]]);
    const late = planStrandedResets({ ...input, now: NOW + GRACE, seen: early.seen });
    expect(late.resets.map((r) => r.id)).toEqual(['x']);
  });

  it('marked from the grace before the timeout on: a dispatch stranded since it was scheduled is reset at the timeout', () => {
    const input = {
      timeoutMs: TIMEOUT,
      graceMs: GRACE,
      beats: [],
      waiting: [waiting('x', TIMEOUT)],
      unsettled: [out('x')],
    };
    const tooEarly = planStrandedResets({ ...input, now: NOW - GRACE - 1, seen: new Map() });
    expect(tooEarly.seen.size).toBe(0);
    const marked = planStrandedResets({ ...input, now: NOW - GRACE, seen: new Map() });
    expect(marked.resets).toEqual([]);
    expect([...marked.seen]).toEqual([['x:1', NOW - GRACE]]);
    const atTimeout = planStrandedResets({ ...input, now: NOW, seen: marked.seen });
    expect(atTimeout.resets.map((r) => r.id)).toEqual(['x']);
  });

  it('a mark is dropped once its worker lists the dispatch: listed after a late hand-out is not stranded', () => {
    const marked = new Map([['x:1', NOW - GRACE]]);
    const listed = planStrandedResets({
      now: NOW,
      timeoutMs: TIMEOUT,
      graceMs: GRACE,
      beats: [beat('a', 0, [['x', 1]])],
      waiting: [waiting('x', TIMEOUT)],
      unsettled: [out('x')],
      seen: marked,
    });
    expect(listed.resets).toEqual([]);
    expect(listed.seen.size).toBe(0);
  });

  it('one never handed out (queued behind busy workers, or no worker at all) is left alone', () => {
    expect(
      planStrandedResets({
        now: NOW,
        timeoutMs: TIMEOUT,
        graceMs: GRACE,
        beats: [],
        waiting: [waiting('x', 60_000)],
        unsettled: [out('y')],
        seen: new Map([['x:1', NOW - GRACE]]),
      }).resets,
    ).toEqual([]);
  });

  it('a reset is by the heartbeat monitor, fenced on the attempt, and says why', () => {
    const [r] = planStrandedResets({
      now: NOW,
      timeoutMs: TIMEOUT,
      graceMs: GRACE,
      beats: [],
      waiting: [waiting('x', 12_000, 2)],
      unsettled: [out('x', 2)],
      seen: new Map([['x:2', NOW - GRACE]]),
    }).resets;
    expect(r?.event).toMatchObject({ type: 'RESET', by: 'heartbeat_monitor', attempt: 2 });
    expect(r?.event.reason).toBe(
      'stranded: dispatch handed to a worker that never listed it (died or froze before reading it); SCHEDULED for 12 s (timeout 10 s)',
    );
  });
});

describe('reconciler decisions', () => {
  const timing = { heartbeatTimeoutMs: TIMEOUT, reconcilerFloorMs: 60_000 };
  const active = (status: OperationStatus, ageMs: number, attempt = 1): ActiveOperation => ({
    id: 'x',
    kind: KIND,
    status,
    attempt,
    startedAt: null,
    scheduledAt: null,
    workerId: status === 'IN_PROGRESS' ? 'w-1' : null,
    since: new Date(NOW - ageMs),
    position: { since: new Date(NOW - ageMs).toISOString(), id: 'x' },
  });
  const rows: [string, ActiveOperation, WorkerHeartbeat[], boolean][] = [
    [
      'SCHEDULED past the floor, no heartbeat: reset (a lost dispatch)',
      active('SCHEDULED', 60_000),
      [],
      true,
    ],
    [
      'IN_PROGRESS past the floor, heartbeat purged: reset',
      active('IN_PROGRESS', 90_000),
      [],
      true,
    ],
    [
      'past the floor but a fresh heartbeat holds it: a long run, left alone',
      active('IN_PROGRESS', 3_600_000),
      [beat('w-1', 0, [['x', 1]])],
      false,
    ],
    [
      'IN_PROGRESS on w-1 past the floor, listed only by fresh w-2: reset (w-2 did not start it)',
      active('IN_PROGRESS', 90_000),
      [beat('w-2', 0, [['x', 1]])],
      true,
    ],
    [
      'SCHEDULED past the floor, listed by a fresh heartbeat: a worker pulled it, left alone',
      active('SCHEDULED', 90_000),
      [beat('w-2', 0, [['x', 1]])],
      false,
    ],
    [
      'past the floor, only a stale heartbeat holds it: reset (the monitor would too)',
      active('IN_PROGRESS', 90_000),
      [beat('w-1', TIMEOUT, [['x', 1]])],
      true,
    ],
    [
      'a fresh heartbeat of an older attempt does not hold this one',
      active('SCHEDULED', 90_000, 2),
      [beat('w-1', 0, [['x', 1]])],
      true,
    ],
    ['younger than the floor: left alone', active('SCHEDULED', 59_999), [], false],
  ];
  it.each(rows)('%s', (_, operation, beats, reset) => {
    const resets = planReconcilerResets({ now: NOW, timing, beats, old: [operation] });
    expect(resets.map((r) => r.id)).toEqual(reset ? ['x'] : []);
    if (reset) {
      expect(resets[0]?.event).toMatchObject({
        type: 'RESET',
        by: 'reconciler',
        attempt: operation.attempt,
      });
      expect(resets[0]?.line).toMatchObject({
        level: 'WARNING',
        message: 'reconciler reset operation',
      });
    }
  });
});

describe('the reconciler spares a dispatch waiting in its queue', () => {
  const timing = { heartbeatTimeoutMs: TIMEOUT, reconcilerFloorMs: 60_000 };
  const Q = 'site_a_buffer_transfer';
  const active = (id: string, status: OperationStatus, attempt = 1): ActiveOperation => ({
    id,
    kind: KIND,
    status,
    attempt,
    startedAt: null,
    scheduledAt: null,
    workerId: status === 'IN_PROGRESS' ? 'w-1' : null,
    since: new Date(NOW - 120_000),
    position: { since: new Date(NOW - 120_000).toISOString(), id },
  });
  const reader = (ageMs: number, queues: string[]): WorkerHeartbeat => ({
    workerId: 'w-1',
    at: NOW - ageMs,
    held: [],
    reads: { queues, kinds: [KIND] },
  });
  const waits = (id: string, attempt = 1, queue = Q) => ({
    message: {
      operationId: id,
      kind: KIND,
      operationType: defaultRoute(KIND).operationType,
      attempt,
    },
    queue,
  });
  const rows: [string, OperationStatus, WorkerHeartbeat[], ReturnType<typeof waits>[], boolean][] =
    [
      [
        'waiting in a queue a live worker reads: spared',
        'SCHEDULED',
        [reader(0, [Q])],
        [waits('x')],
        false,
      ],
      ['not found waiting: reset (lost)', 'SCHEDULED', [reader(0, [Q])], [], true],
      [
        'waiting, but only a stale worker reads the queue: reset',
        'SCHEDULED',
        [reader(TIMEOUT, [Q])],
        [waits('x')],
        true,
      ],
      [
        'waiting, but no live worker reads that queue: reset',
        'SCHEDULED',
        [reader(0, ['other'])],
        [waits('x')],
        true,
      ],
      [
        'an older attempt waiting does not stand for this one: reset',
        'SCHEDULED',
        [reader(0, [Q])],
        [waits('x', 0)],
        true,
      ],
      [
        'IN_PROGRESS is never spared by a waiting message',
        'IN_PROGRESS',
        [reader(0, [Q])],
        [waits('x')],
        true,
      ],
    ];
  it.each(rows)('%s', (_, status, beats, found, reset) => {
    const planned = planReconcilerResets({ now: NOW, timing, beats, old: [active('x', status)] });
    expect(planned.map((r) => r.id)).toEqual(['x']);
    const waiting = { found, complete: true };
    const kept = spareWaiting({
      resets: planned,
      waiting,
      beats,
      now: NOW,
      heartbeatTimeoutMs: TIMEOUT,
    });
    expect(kept.resets.map((r) => r.id)).toEqual(reset ? ['x'] : []);
    if (reset) expect(kept.line).toBeUndefined();
    else {
      expect(kept.line).toMatchObject({
        level: 'INFO',
        fields: { count: 1, queues: { [Q]: 1 }, complete: true },
      });
    }
  });

  it('spares only the waiting ones of a pass, and counts them per queue', () => {
    const beats = [reader(0, [Q, 'q2'])];
    const old = ['a', 'b', 'c', 'd'].map((id) => active(id, 'SCHEDULED'));
    const planned = planReconcilerResets({ now: NOW, timing, beats, old });
    const waiting = { found: [waits('a'), waits('c', 1, 'q2'), waits('d')], complete: false };
    const kept = spareWaiting({
      resets: planned,
      waiting,
      beats,
      now: NOW,
      heartbeatTimeoutMs: TIMEOUT,
    });
    expect(kept.resets.map((r) => r.id)).toEqual(['b']);
    expect(Object.fromEntries(kept.spared)).toEqual({ [Q]: 2, q2: 1 });
    expect(kept.line?.fields).toMatchObject({ count: 3, complete: false });
  });
});
