import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, type SnapshotFrom, transition } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import {
  createOperationState,
  decide,
  type PersistedOperationSnapshot,
} from '../../machines/decide.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import {
  type OperationContext,
  type OperationEvent,
  operationMachine,
  type ResetBy,
} from '../../machines/operationMachine.ts';

type Snap = SnapshotFrom<typeof operationMachine>;
const AT = '2026-01-01T00:00:00.000Z';
const LATER = '2031-01-01T00:00:00.000Z';
const MAX_RETRIES = 2;
const MAX_ATTEMPT = 5;

/** Events offered in every state, built around its current attempt: current, stale and future. */
function eventsFor(snapshot: Snap): OperationEvent[] {
  const a = snapshot.context.attempt;
  const attempts = [a, a - 1, a + 1].filter((n) => n >= 1);
  const events: OperationEvent[] = [
    { type: 'SCHEDULE', at: AT },
    { type: 'RETRY', at: AT },
  ];
  events.push({ type: 'CANCEL', reason: 'operator asked', at: AT });
  for (const attempt of attempts) {
    events.push({ type: 'START', attempt, workerId: 'w', at: AT });
    events.push({ type: 'COMPLETE', attempt, at: AT });
    events.push({ type: 'FAIL', attempt, error: { message: 'flaky', retryable: true }, at: AT });
    events.push({ type: 'FAIL', attempt, error: { message: 'broken', retryable: false }, at: AT });
    events.push({ type: 'RESET', by: 'reconciler', reason: 'fenced', attempt, at: AT });
  }
  for (const by of ['heartbeat_monitor', 'broker', 'operator'] as ResetBy[]) {
    events.push({ type: 'RESET', by, reason: 'unfenced', at: AT });
  }
  return events;
}

interface Expected {
  value: string;
  attempt: number;
  retryCount: number;
}

/**
 * The lifecycle written out independently of the machine: what each (state, event) must do.
 * Returns null where the machine must refuse the event and leave the snapshot unchanged.
 */
function oracle(value: string, c: OperationContext, e: OperationEvent): Expected | null {
  const same = { attempt: c.attempt, retryCount: c.retryCount };
  const backToPending = { value: 'PENDING', attempt: c.attempt + 1, retryCount: c.retryCount + 1 };
  const budget = c.retryCount < c.maxRetries;
  const current = 'attempt' in e && e.attempt !== undefined ? e.attempt === c.attempt : true;
  const fenced = (e.type === 'START' || e.type === 'COMPLETE' || e.type === 'FAIL') && !current;
  switch (value) {
    case 'PENDING':
      if (e.type === 'SCHEDULE') return { value: 'SCHEDULED', ...same };
      if (e.type === 'CANCEL') return { value: 'FAILED', ...same };
      return null;
    case 'SCHEDULED':
      if (e.type === 'START') return fenced ? null : { value: 'IN_PROGRESS', ...same };
      if (e.type === 'RESET') {
        if (!current) return null;
        return budget ? backToPending : { value: 'FAILED', ...same };
      }
      if (e.type === 'CANCEL') return { value: 'FAILED', ...same };
      return null;
    case 'IN_PROGRESS':
      if (e.type === 'COMPLETE') return fenced ? null : { value: 'COMPLETED', ...same };
      if (e.type === 'FAIL') {
        if (fenced) return null;
        return e.error.retryable && budget ? backToPending : { value: 'FAILED', ...same };
      }
      if (e.type === 'RESET') {
        if (!current) return null;
        return budget ? backToPending : { value: 'FAILED', ...same };
      }
      if (e.type === 'CANCEL') return { value: 'FAILED', ...same };
      return null;
    case 'FAILED':
      if (e.type === 'RETRY') return { value: 'PENDING', attempt: c.attempt + 1, retryCount: 0 };
      return null;
    default:
      return null; // COMPLETED is final
  }
}

function explore() {
  return getAdjacencyMap(operationMachine, {
    input: { kind: OperationKind.TRANSFER, maxRetries: MAX_RETRIES },
    events: eventsFor,
    stopWhen: (s) => s.context.attempt >= MAX_ATTEMPT,
    serializeState: (s) => JSON.stringify([s.value, s.context]),
    serializeEvent: (e) => JSON.stringify(e),
  });
}

describe('operationMachine: every reachable (state × event) pair', () => {
  const pairs = adjacencyMapToArray(explore());

  it('explores every status and many contexts', () => {
    const values = new Set(pairs.map((p) => p.state.value));
    expect([...values].sort()).toEqual([
      'COMPLETED',
      'FAILED',
      'IN_PROGRESS',
      'PENDING',
      'SCHEDULED',
    ]);
    expect(pairs.length).toBeGreaterThan(200);
  });

  it('matches the written lifecycle for each pair, and decide() agrees (or refuses with a reason)', () => {
    let accepted = 0;
    let refused = 0;
    for (const { state, event, nextState } of pairs) {
      const want = oracle(state.value as string, state.context, event);
      const persisted = operationMachine.getPersistedSnapshot(state);
      if (want === null) {
        refused++;
        expect(nextState.value, `${state.value} + ${JSON.stringify(event)}`).toBe(state.value);
        expect(nextState.context).toEqual(state.context);
        const stale =
          'attempt' in event &&
          event.attempt !== undefined &&
          event.attempt !== state.context.attempt;
        expect(() => decide(persisted, event)).toThrow(
          expect.objectContaining({
            code: stale ? OpstateErrorCode.STALE_ATTEMPT : OpstateErrorCode.INVALID_EVENT,
          }),
        );
        continue;
      }
      accepted++;
      const label = `${state.value}(${state.context.attempt}/${state.context.retryCount}) + ${JSON.stringify(event)}`;
      expect(
        {
          value: nextState.value,
          attempt: nextState.context.attempt,
          retryCount: nextState.context.retryCount,
        },
        label,
      ).toEqual(want);
      const d = decide(persisted, event);
      expect(d.status, label).toBe(want.value);
      expect(d.context.attempt, label).toBe(want.attempt);
    }
    expect(accepted).toBeGreaterThan(50);
    expect(refused).toBeGreaterThan(50);
  });

  it('covers every edge of the definition, back-edges included', () => {
    const staticEdges = new Set<string>();
    for (const [key, node] of Object.entries(operationMachine.root.states)) {
      for (const [type, defs] of node.transitions) {
        for (const t of defs)
          for (const target of t.target ?? []) staticEdges.add(`${key}-${type}->${target.key}`);
      }
    }
    const walked = new Set(
      pairs
        .filter(
          (p) => p.nextState.value !== p.state.value || p.nextState.context !== p.state.context,
        )
        .map((p) => `${p.state.value}-${p.event.type}->${p.nextState.value}`),
    );
    for (const edge of staticEdges) expect(walked, edge).toContain(edge);
    expect(staticEdges).toContain('IN_PROGRESS-RESET->PENDING');
    expect(staticEdges).toContain('FAILED-RETRY->PENDING');
  });

  it('round-trips every reachable snapshot through JSON and createActor', () => {
    const vertices = new Map<string, Snap>();
    for (const p of pairs) {
      vertices.set(JSON.stringify([p.state.value, p.state.context]), p.state);
    }
    expect(vertices.size).toBeGreaterThan(15);
    for (const snapshot of vertices.values()) {
      const json = JSON.parse(JSON.stringify(operationMachine.getPersistedSnapshot(snapshot)));
      expect(JSON.stringify(json).length).toBeLessThanOrEqual(1024);
      const actor = createActor(operationMachine, {
        snapshot: json,
        input: { kind: OperationKind.TRANSFER },
      });
      const restored = actor.getSnapshot();
      expect(restored.status).not.toBe('error');
      expect(restored.value).toBe(snapshot.value);
      expect(restored.context).toEqual(snapshot.context);
      expect(JSON.parse(JSON.stringify(actor.getPersistedSnapshot()))).toEqual(json);
    }
  });
});

describe('operationMachine: fencing, retry cap and backoff', () => {
  const start = (kind = OperationKind.LONG_TERM_ARCHIVE, maxRetries = 3) => {
    const s0 = createOperationState({ kind, maxRetries });
    const s1 = decide(s0.snapshot, { type: 'SCHEDULE', at: AT });
    return decide(s1.snapshot, { type: 'START', attempt: 1, workerId: 'w1', at: AT });
  };

  it('gives equal inputs equal decisions that share nothing, and unequal inputs their own', () => {
    const s0 = createOperationState({ kind: OperationKind.TRANSFER });
    const first = decide(s0.snapshot, { type: 'SCHEDULE', at: AT });
    const again = decide(s0.snapshot, { type: 'SCHEDULE', at: AT });
    // The same context with its keys in another order is another input key: decided afresh.
    const reordered = {
      ...s0.snapshot,
      context: Object.fromEntries(Object.entries(s0.snapshot.context).reverse()),
    };
    expect(decide(reordered, { type: 'SCHEDULE', at: AT })).toEqual(first);
    expect(again).toEqual(first);
    expect(again.snapshot).not.toBe(first.snapshot);
    expect(again.snapshot.context).not.toBe(first.snapshot.context);
    expect(again.context).not.toBe(first.context);
    expect(again.effects[0]).not.toBe(first.effects[0]);
    (first.context as { attempt: number }).attempt = 99;
    (first.effects[0] as { attempt: number }).attempt = 99;
    expect(decide(s0.snapshot, { type: 'SCHEDULE', at: AT }).effects).toEqual([
      { type: 'dispatch', attempt: 1 },
    ]);
    const w1 = decide(again.snapshot, { type: 'START', attempt: 1, workerId: 'w1', at: AT });
    const w2 = decide(again.snapshot, { type: 'START', attempt: 1, workerId: 'w2', at: AT });
    expect([w1.context.workerId, w2.context.workerId]).toEqual(['w1', 'w2']);
    const later = decide(again.snapshot, { type: 'START', attempt: 1, workerId: 'w1', at: LATER });
    expect(later.context.workerId).toBe('w1');
  });

  it('emits a dispatch effect on SCHEDULE with the attempt', () => {
    const s0 = createOperationState({ kind: OperationKind.UNPACK });
    expect(decide(s0.snapshot, { type: 'SCHEDULE' }).effects).toEqual([
      { type: 'dispatch', attempt: 1 },
    ]);
  });

  it('refuses a stale worker after a reset: its completion cannot move the operation', () => {
    const running = start();
    const reset = decide(running.snapshot, {
      type: 'RESET',
      by: 'heartbeat_monitor',
      reason: 'stale heartbeat',
    });
    expect(reset.status).toBe('PENDING');
    expect(reset.context.attempt).toBe(2);
    expect(reset.effects).toEqual([
      {
        type: 'abortWork',
        attempt: 1,
        workerId: 'w1',
        reason: 'reset by heartbeat_monitor: stale heartbeat',
      },
    ]);
    const rescheduled = decide(reset.snapshot, { type: 'SCHEDULE' });
    const err = (() => {
      try {
        decide(rescheduled.snapshot, { type: 'START', attempt: 1, workerId: 'old' });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(OpstateError);
    expect((err as OpstateError).code).toBe(OpstateErrorCode.STALE_ATTEMPT);
    const restarted = decide(rescheduled.snapshot, { type: 'START', attempt: 2, workerId: 'new' });
    expect(() => decide(restarted.snapshot, { type: 'COMPLETE', attempt: 1 })).toThrow(
      /attempt 1 refused/,
    );
    expect(decide(restarted.snapshot, { type: 'COMPLETE', attempt: 2 }).status).toBe('COMPLETED');
  });

  it('a fenced RESET for an attempt that is no longer current is refused', () => {
    const running = start();
    expect(() =>
      decide(running.snapshot, { type: 'RESET', by: 'reconciler', reason: 'late', attempt: 7 }),
    ).toThrow(expect.objectContaining({ code: OpstateErrorCode.STALE_ATTEMPT }));
  });

  it('spends the retry budget, then FAILS with the reason and a breadcrumb effect', () => {
    let d = start(OperationKind.TRANSFER, 3);
    for (let i = 1; i <= 3; i++) {
      d = decide(d.snapshot, {
        type: 'FAIL',
        attempt: i,
        error: { message: `timeout ${i}`, retryable: true },
        at: AT,
      });
      expect(d.status).toBe('PENDING');
      expect(d.context.retryCount).toBe(i);
      expect(d.effects).toEqual([
        { type: 'recordFailure', attempt: i, error: { message: `timeout ${i}`, retryable: true } },
      ]);
      d = decide(d.snapshot, { type: 'SCHEDULE' });
      d = decide(d.snapshot, { type: 'START', attempt: i + 1, workerId: 'w', at: AT });
    }
    d = decide(d.snapshot, {
      type: 'FAIL',
      attempt: 4,
      error: { message: 'timeout 4', retryable: true },
      at: AT,
    });
    expect(d.status).toBe('FAILED');
    expect(d.context.lastError?.message).toBe('timeout 4');
  });

  it('exhausts the budget through resets too, naming who reset and why', () => {
    let d = start(OperationKind.STAGING, 1);
    d = decide(d.snapshot, { type: 'RESET', by: 'reconciler', reason: 'no live task' });
    expect(d.status).toBe('PENDING');
    d = decide(d.snapshot, { type: 'SCHEDULE' });
    d = decide(d.snapshot, { type: 'RESET', by: 'reconciler', reason: 'no live task again' });
    expect(d.status).toBe('FAILED');
    expect(d.context.lastError).toMatchObject({ code: 'RETRIES_EXHAUSTED', retryable: false });
    expect(d.context.lastError?.message).toContain('reconciler');
  });

  it('sets notBefore from the backoff, doubling per retry, or from retryDelayMs', () => {
    let d = start();
    d = decide(d.snapshot, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'x', retryable: true },
      at: AT,
    });
    expect(d.context.notBefore).toBe('2026-01-01T00:00:01.000Z');
    d = decide(decide(d.snapshot, { type: 'SCHEDULE' }).snapshot, {
      type: 'START',
      attempt: 2,
      workerId: 'w',
    });
    d = decide(d.snapshot, {
      type: 'FAIL',
      attempt: 2,
      error: { message: 'x', retryable: true },
      at: AT,
    });
    expect(d.context.notBefore).toBe('2026-01-01T00:00:02.000Z');
    d = decide(decide(d.snapshot, { type: 'SCHEDULE' }).snapshot, {
      type: 'START',
      attempt: 3,
      workerId: 'w',
    });
    d = decide(d.snapshot, {
      type: 'FAIL',
      attempt: 3,
      error: { message: 'x', retryable: true },
      retryDelayMs: 60_000,
      at: AT,
    });
    expect(d.context.notBefore).toBe('2026-01-01T00:01:00.000Z');
  });

  it('a non-retryable failure goes straight to FAILED; RETRY gives a fresh budget and attempt', () => {
    let d = start();
    d = decide(d.snapshot, {
      type: 'FAIL',
      attempt: 1,
      error: { message: 'bad manifest', retryable: false },
    });
    expect(d.status).toBe('FAILED');
    expect(d.context.retryCount).toBe(0);
    d = decide(d.snapshot, { type: 'RETRY' });
    expect(d.status).toBe('PENDING');
    expect(d.context).toMatchObject({ attempt: 2, retryCount: 0, notBefore: null });
  });

  it('rejects malformed events with BAD_INPUT and unknown kinds at creation', () => {
    const s = createOperationState({ kind: OperationKind.TRANSFER }).snapshot;
    const bad = [
      { type: 'EXPLODE' },
      { type: 'START', attempt: 0, workerId: 'w' },
      { type: 'START', attempt: 1 },
      { type: 'FAIL', attempt: 1, error: 'oops' },
      { type: 'RESET', by: 'somebody', reason: 'x' },
      { type: 'CANCEL' },
      { type: 'SCHEDULE', at: 'yesterday' },
      null,
    ];
    for (const event of bad) {
      expect(() => decide(s, event as unknown as OperationEvent)).toThrow(
        expect.objectContaining({ code: OpstateErrorCode.BAD_INPUT }),
      );
    }
    expect(() => createOperationState({ kind: 'archive' as OperationKind })).toThrow(
      /unknown operation kind "archive"/,
    );
  });

  it('refuses a snapshot with an impossible state instead of starting it', () => {
    expect(() => decide({ value: 'PAUSED', context: {} }, { type: 'SCHEDULE' })).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.SNAPSHOT_VERSION }),
    );
  });

  it('keeps context free of anything that jsonb would change', () => {
    const [s] = initialTransition(operationMachine, { kind: OperationKind.STAGING });
    expect(JSON.parse(JSON.stringify(s.context))).toEqual(s.context);
  });
});

describe('decide persists exactly what xstate would', () => {
  it('for every accepted event in every state, the snapshot equals transition() + getPersistedSnapshot()', () => {
    const at = '2030-01-01T00:00:00.000Z';
    const events = (attempt: number): OperationEvent[] => [
      { type: 'SCHEDULE', at },
      { type: 'START', attempt, workerId: 'w-1', at },
      { type: 'COMPLETE', attempt, at },
      { type: 'FAIL', attempt, error: { message: 'x', retryable: true }, at },
      { type: 'FAIL', attempt, error: { message: 'y', retryable: false }, at },
      { type: 'RESET', by: 'heartbeat_monitor', reason: 'stale', attempt, at },
      { type: 'RETRY', at },
      { type: 'CANCEL', reason: 'no', at },
    ];
    let frontier = [createOperationState({ kind: OperationKind.UNPACK, maxRetries: 1 }).snapshot];
    let compared = 0;
    for (let depth = 0; depth < 6; depth++) {
      const next: PersistedOperationSnapshot[] = [];
      for (const snapshot of frontier) {
        for (const event of events(snapshot.context.attempt)) {
          let mine: PersistedOperationSnapshot;
          try {
            mine = decide(snapshot, event).snapshot;
          } catch {
            continue; // refused: nothing persisted
          }
          const [theirs] = transition(
            operationMachine,
            operationMachine.resolveState({ value: snapshot.value, context: snapshot.context }),
            event,
          );
          expect(JSON.parse(JSON.stringify(mine))).toEqual(
            JSON.parse(JSON.stringify(operationMachine.getPersistedSnapshot(theirs))),
          );
          compared++;
          next.push(mine);
        }
      }
      frontier = next;
    }
    expect(compared).toBeGreaterThan(100);
  });
});
