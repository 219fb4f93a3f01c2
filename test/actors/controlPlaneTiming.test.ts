import { describe, expect, it } from 'vitest';
import {
  type ControlPlaneStore,
  DEFAULT_CONTROL_PLANE_TIMING,
  startControlPlaneLoops,
} from '../../control-plane/ControlPlane.ts';
import { DEFAULT_DEADLINES_MS, resolveDeadlines } from '../../machines/deadlines.ts';
import { createOperationState, decide } from '../../machines/decide.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationEvent, OperationStatus } from '../../machines/operationMachine.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { OperationRecord } from '../../persistence/OperationRecord.ts';
import { createInProcessTransport } from '../../transport/inprocess/createInProcessTransport.ts';

const TRANSPORT = {
  heartbeatIntervalMs: 1_000,
  heartbeatTimeoutMs: 10_000,
  reconcilerFloorMs: 60_000,
  ackWaitMs: 70_000,
};
const PLANE = {
  ...DEFAULT_CONTROL_PLANE_TIMING,
  monitorIntervalMs: 1_000,
  reconcilerIntervalMs: 15_000,
};
const KIND = OperationKind.TRANSFER;

/**
 * Operations in memory behind the control plane's store port: events go through the real pure
 * machine (`decide`), so fencing and retry rules are the real ones; every reset is noted with the
 * clock's time.
 */
function memoryStore(clock: SimulatedClock) {
  interface Row {
    id: string;
    status: OperationStatus;
    attempt: number;
    version: number;
    snapshot: unknown;
    since: Date;
    /** The worker the START recorded. */
    workerId: string | null;
    /** The operation's own deadline (ms), or null for its kind's. */
    deadlineMs: number | null;
  }
  const rows = new Map<string, Row>();
  const resets: { id: string; by: string; at: number; reason: string }[] = [];
  const folds: number[] = [];
  const asRecord = (r: Row) =>
    ({
      id: r.id,
      kind: KIND,
      status: r.status,
      attempt: r.attempt,
      version: r.version,
      workerId: r.workerId,
    }) as OperationRecord;
  const store: ControlPlaneStore = {
    database: {} as ControlPlaneStore['database'],
    countScheduled: async () => [...rows.values()].filter((r) => r.status === 'SCHEDULED').length,
    claimDue: async () => ({ claimed: [], refused: [], heldBack: 0 }),
    relayPosition: async () => ({ after: 0, newest: 0 }),
    dispatchBarrier: async () => 0,
    fetchScheduled: async () => [],
    loadDispatches: async () => [],
    saveRelayCursor: async () => false,
    routedLocations: async () => [],
    maintainHistory: async () => ({
      made: 0,
      spilled: 0,
      dropped: [],
      kept: [],
      journal: { made: 0, spilled: 0, dropped: [], kept: [] },
    }),
    foldCounts: async () => {
      folds.push(clock.now());
      return 0;
    },
    loadMany: async (ids) =>
      new Map(ids.flatMap((id) => (rows.has(id) ? [[id, asRecord(rows.get(id) as Row)]] : []))),
    // The SQL's order and pages: oldest first by (since, id), after the position given.
    listActiveOlderThan: async (before, limit = 1000, page = {}) => {
      const key = (since: string, id: string) => `${since}|${id}`;
      const after = page.after === undefined ? '' : key(page.after.since, page.after.id);
      return [...rows.values()]
        .filter(
          (r) =>
            (page.status === undefined
              ? r.status === 'SCHEDULED' || r.status === 'IN_PROGRESS'
              : r.status === page.status) &&
            r.since < before &&
            key(r.since.toISOString(), r.id) > after,
        )
        .sort((a, b) =>
          key(a.since.toISOString(), a.id) < key(b.since.toISOString(), b.id) ? -1 : 1,
        )
        .slice(0, limit)
        .map((r) => ({
          ...asRecord(r),
          startedAt: null,
          scheduledAt: null,
          since: r.since,
          position: { since: r.since.toISOString(), id: r.id },
        }));
    },
    // The SQL's rule: IN_PROGRESS and START at least a deadline ago.
    listPastDeadline: async (now, deadlines) =>
      [...rows.values()]
        .filter(
          (r) =>
            r.status === 'IN_PROGRESS' &&
            r.since.getTime() <= now.getTime() - (r.deadlineMs ?? deadlines[KIND]),
        )
        .map((r) => ({
          id: r.id,
          kind: KIND,
          attempt: r.attempt,
          startedAt: r.since,
          workerId: r.workerId,
          deadlineMs: r.deadlineMs,
        })),
    apply: async (id, event) => {
      const row = rows.get(id) as Row;
      const d = decide(row.snapshot, event);
      Object.assign(row, {
        status: d.status,
        attempt: d.context.attempt,
        version: row.version + 1,
        snapshot: d.snapshot,
        since: new Date(clock.now()),
        workerId: d.context.workerId,
      });
      if (event.type === 'RESET')
        resets.push({ id, by: event.by, at: clock.now(), reason: event.reason });
      return {} as Awaited<ReturnType<ControlPlaneStore['apply']>>;
    },
  };
  /** An operation walked to `status` now, at attempt 1 (started by `workerId`). */
  const add = (
    id: string,
    status: 'SCHEDULED' | 'IN_PROGRESS',
    workerId = 'w',
    deadlineMs: number | null = null,
  ) => {
    let snapshot: unknown = createOperationState({ kind: KIND }).snapshot;
    const walk: OperationEvent[] = [{ type: 'SCHEDULE' }, { type: 'START', attempt: 1, workerId }];
    for (const e of walk.slice(0, status === 'SCHEDULED' ? 1 : 2))
      snapshot = decide(snapshot, e).snapshot;
    rows.set(id, {
      id,
      status,
      attempt: 1,
      version: 0,
      snapshot,
      since: new Date(clock.now()),
      workerId: status === 'IN_PROGRESS' ? workerId : null,
      deadlineMs,
    });
  };
  return { store, rows, resets, folds, add };
}

function deployment(deadlines = DEFAULT_DEADLINES_MS, plane = PLANE) {
  const clock = new SimulatedClock();
  const transport = createInProcessTransport({ timing: TRANSPORT, clock });
  const mem = memoryStore(clock);
  const logger = memoryLogger();
  const loops = startControlPlaneLoops({
    store: mem.store,
    transport,
    clock,
    logger,
    timing: plane,
    deadlines,
    breakers: {
      latestTransitionId: async () => 0,
      readOutcomes: async () => ({ ids: [], outcomes: [] }),
      loadForPass: async () => [],
      write: async () => [],
    },
  });
  const beat = (workerId: string, ids: string[]) =>
    transport.heartbeats.beat(
      workerId,
      ids.map((operationId) => ({ kind: KIND, operationId, attempt: 1 })),
    );
  return { clock, transport, logger, loops, beat, ...mem };
}

describe('heartbeat monitor on a simulated clock', () => {
  it('resets what only a stale heartbeat holds exactly when the heartbeat timeout has passed, and leaves what a beating worker holds', async () => {
    const d = deployment();
    const t0 = d.clock.now();
    d.add('dead-running', 'IN_PROGRESS', 'w-dead');
    d.add('dead-pulled', 'SCHEDULED');
    d.add('alive', 'IN_PROGRESS', 'w-alive');
    await d.beat('w-dead', ['dead-running', 'dead-pulled']);
    for (let s = 0; s < 9; s++) {
      await d.beat('w-alive', ['alive']);
      await d.clock.advance(1_000);
    }
    await d.beat('w-alive', ['alive']);
    await d.clock.advance(999);
    expect(d.resets).toEqual([]); // 9.999 s after the last beat: still within the timeout
    await d.clock.advance(1);
    expect(d.resets.map((r) => [r.id, r.by, r.at - t0])).toEqual([
      ['dead-running', 'heartbeat_monitor', 10_000],
      ['dead-pulled', 'heartbeat_monitor', 10_000],
    ]);
    expect(d.rows.get('dead-running')).toMatchObject({ status: 'PENDING', attempt: 2 });
    expect(d.resets[0]?.reason).toContain(
      'w-dead, whose last heartbeat was 10 s ago (timeout 10 s)',
    );
    for (let s = 0; s < 60; s++) {
      await d.beat('w-alive', ['alive']);
      await d.clock.advance(1_000);
    }
    expect(d.resets).toHaveLength(2); // a live worker's operation is never reset, however long
    expect(
      d.logger.lines.filter((l) => l.message === 'heartbeat monitor reset operation'),
    ).toHaveLength(2);
    await d.loops.stop();
    await d.transport.close();
  });
});

describe('reconciler on a simulated clock', () => {
  it('resets what no live worker holds at its first pass past the floor, with one WARNING each, and never what a live worker holds', async () => {
    const d = deployment();
    const t0 = d.clock.now();
    d.add('lost-dispatch', 'SCHEDULED'); // nobody ever pulled it: no heartbeat lists it
    d.add('long-running', 'IN_PROGRESS', 'w-1');
    for (let s = 0; s < 74; s++) {
      await d.beat('w-1', ['long-running']);
      await d.clock.advance(1_000);
    }
    await d.beat('w-1', ['long-running']);
    await d.clock.advance(999);
    // Passes at 0, 15, 30, 45 s; at 60 s it was exactly as old as the floor, not older.
    expect(d.resets).toEqual([]);
    await d.clock.advance(1);
    expect(d.resets.map((r) => [r.id, r.by, r.at - t0])).toEqual([
      ['lost-dispatch', 'reconciler', 75_000],
    ]);
    expect(d.resets[0]?.reason).toBe(
      'SCHEDULED for 75 s (floor 60 s) with no live worker holding it',
    );
    for (let s = 0; s < 240; s++) {
      await d.beat('w-1', ['long-running']);
      await d.clock.advance(1_000);
    }
    expect(d.resets).toHaveLength(1);
    expect(d.logger.lines.filter((l) => l.level === 'WARNING').map((l) => l.message)).toEqual([
      'reconciler reset operation',
    ]);
    await d.loops.stop();
    await d.transport.close();
  });

  it('finds a lost operation behind more than a page of long-running ones a live worker holds', async () => {
    const d = deployment();
    // 1,100 held by w-1 (over one 1,000-row page, all older), then one whose worker's key is gone.
    const held = Array.from({ length: 1_100 }, (_, i) => `held-${String(i).padStart(4, '0')}`);
    for (const id of held) d.add(id, 'IN_PROGRESS', 'w-1');
    await d.clock.advance(1_000);
    d.add('lost', 'IN_PROGRESS', 'w-gone');
    for (let s = 0; s < 80; s++) {
      await d.beat('w-1', held);
      await d.clock.advance(1_000);
    }
    expect(d.resets.map((r) => [r.id, r.by])).toEqual([['lost', 'reconciler']]);
    expect(d.rows.get('held-1099')).toMatchObject({ status: 'IN_PROGRESS', attempt: 1 });
    await d.loops.stop();
    await d.transport.close();
  });

  it('reads the heartbeats once per pass, however many pages the operations in flight take', async () => {
    // The monitor, which reads them too, passes once at the start and not again in this test.
    const d = deployment(DEFAULT_DEADLINES_MS, { ...PLANE, monitorIntervalMs: 1_000_000 });
    const held = Array.from({ length: 2_100 }, (_, i) => `held-${String(i).padStart(4, '0')}`);
    for (const id of held) d.add(id, 'IN_PROGRESS', 'w-1');
    // Every heartbeat read from now on, and every reconciler pass that found operations past the
    // floor (its first page not empty).
    const calls = { lists: 0, reconcilerPasses: 0 };
    const list = d.transport.heartbeats.list.bind(d.transport.heartbeats);
    d.transport.heartbeats.list = () => {
      calls.lists++;
      return list();
    };
    const pages = d.store.listActiveOlderThan;
    (d.store as { listActiveOlderThan: typeof pages }).listActiveOlderThan = async (
      before,
      limit,
      page,
    ) => {
      const rows = await pages(before, limit, page);
      if (page?.after === undefined && page?.status === undefined && rows.length > 0) {
        calls.reconcilerPasses++;
      }
      return rows;
    };
    for (let s = 0; s < 100; s++) {
      await d.beat('w-1', held);
      await d.clock.advance(1_000);
    }
    // Stopped first: a pass in progress finishes, so each counted pass made all its reads.
    await d.loops.stop();
    // Past the floor from 60 s on: each pass read three pages (2,100 rows), and one heartbeat.
    expect(calls.reconcilerPasses).toBeGreaterThanOrEqual(2);
    expect(calls.lists).toBe(calls.reconcilerPasses);
    expect(d.resets).toEqual([]);
    await d.transport.close();
  });

  it('a reset that lost its race (the worker completed meanwhile) is routine: DEBUG, and the loop goes on', async () => {
    const d = deployment();
    d.add('raced', 'SCHEDULED');
    const apply = d.store.apply;
    let first = true;
    (d.store as { apply: ControlPlaneStore['apply'] }).apply = async (id, event, options) => {
      if (first) {
        first = false; // the worker's START and COMPLETE land between the read and the reset
        await apply(id, { type: 'START', attempt: 1, workerId: 'late' }, {});
        await apply(id, { type: 'COMPLETE', attempt: 1 }, {});
      }
      return apply(id, event, options);
    };
    await d.clock.advance(75_000);
    expect(d.rows.get('raced')?.status).toBe('COMPLETED');
    expect(d.logger.lines.map((l) => `${l.level} ${l.message}`)).toContain(
      'DEBUG reconciler reset skipped: the operation moved on',
    );
    d.add('later', 'SCHEDULED');
    await d.clock.advance(75_000);
    expect(d.resets.map((r) => r.id)).toEqual(['later']);
    expect(d.logger.lines.some((l) => l.level === 'ERROR')).toBe(false);
    await d.loops.stop();
    await d.transport.close();
  });
});

describe('deadline path on a simulated clock', () => {
  it('resets an attempt at its first pass past its deadline although its worker beats on, with one WARNING each, and leaves one within its deadline', async () => {
    const d = deployment(resolveDeadlines({ [KIND]: 45_000 }));
    const t0 = d.clock.now();
    d.add('hung', 'IN_PROGRESS', 'w-1', 30_000); // its own deadline, from submit
    d.add('kind-deadline', 'IN_PROGRESS', 'w-1'); // the kind's: 45 s
    d.add('in-time', 'IN_PROGRESS', 'w-1', 600_000);
    for (let s = 0; s < 29; s++) {
      await d.beat('w-1', ['hung', 'kind-deadline', 'in-time']);
      await d.clock.advance(1_000);
    }
    await d.beat('w-1', ['hung', 'kind-deadline', 'in-time']);
    await d.clock.advance(999);
    expect(d.resets).toEqual([]); // 29.999 s after its START: within its deadline
    await d.clock.advance(1);
    expect(d.resets.map((r) => [r.id, r.by, r.at - t0])).toEqual([['hung', 'deadline', 30_000]]);
    expect(d.resets[0]?.reason).toBe(
      'deadline passed: IN_PROGRESS on w-1 for 30.0 s since its START, past its deadline of 30 s (set at submit); reset whatever its heartbeats say',
    );
    // A reset like any other: a new attempt, one retry spent.
    expect(d.rows.get('hung')).toMatchObject({ status: 'PENDING', attempt: 2 });
    for (let s = 0; s < 15; s++) {
      await d.beat('w-1', ['kind-deadline', 'in-time']);
      await d.clock.advance(1_000);
    }
    expect(d.resets.map((r) => [r.id, r.at - t0])).toEqual([
      ['hung', 30_000],
      ['kind-deadline', 45_000],
    ]);
    expect(d.resets[1]?.reason).toContain("past its deadline of 45 s (transfer's)");
    for (let s = 0; s < 120; s++) {
      await d.beat('w-1', ['in-time']);
      await d.clock.advance(1_000);
    }
    expect(d.resets).toHaveLength(2);
    expect(
      d.logger.lines
        .filter((l) => l.message === 'deadline reset operation')
        .map((l) => [l.level, l.fields.operationId, l.fields.deadlineMs]),
    ).toEqual([
      ['WARNING', 'hung', 30_000],
      ['WARNING', 'kind-deadline', 45_000],
    ]);
    await d.loops.stop();
    await d.transport.close();
  });
});

describe('count folding on a simulated clock', () => {
  it('the leader folds the counts at start and every countFoldIntervalMs after, and a failed fold is retried', async () => {
    const d = deployment();
    const t0 = d.clock.now();
    await d.clock.advance(2 * PLANE.countFoldIntervalMs - 1);
    expect(d.folds.map((at) => at - t0)).toEqual([0, PLANE.countFoldIntervalMs]);
    const fold = d.store.foldCounts;
    let fail = true;
    (d.store as { foldCounts: ControlPlaneStore['foldCounts'] }).foldCounts = async () => {
      if (fail) {
        fail = false;
        throw new Error('permission denied for function opstate_fold_operation_tally');
      }
      return fold();
    };
    await d.clock.advance(1); // the third pass fails; the loop retries after its interval
    await d.clock.advance(PLANE.countFoldIntervalMs);
    expect(d.folds.map((at) => at - t0)).toEqual([
      0,
      PLANE.countFoldIntervalMs,
      3 * PLANE.countFoldIntervalMs,
    ]);
    expect(d.logger.lines.map((l) => `${l.level} ${l.message}`)).toContain(
      'ERROR count folding pass failed; retrying',
    );
    await d.loops.stop();
    await d.transport.close();
  });
});
