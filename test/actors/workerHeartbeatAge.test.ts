import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { Transport } from '../../transport/Transport.ts';
import { startWorkerHeartbeat } from '../../worker/WorkerHeartbeat.ts';

/** A transport whose heartbeat writes land or fail as the test says. */
function fakeTransport(state: { failing: boolean; beats: number }): Transport {
  return {
    timing: { heartbeatIntervalMs: 100, heartbeatTimeoutMs: 1_000 },
    heartbeats: {
      async claim() {},
      async beat() {
        if (state.failing) throw new Error('broker unreachable');
        state.beats++;
      },
    },
  } as unknown as Transport;
}

/** A heartbeat on a simulated clock over `fakeTransport`, recording each overdue age it reports. */
function simulatedHeartbeat(afterBeat?: () => Promise<void>) {
  const clock = new SimulatedClock();
  const state = { failing: false, beats: 0 };
  const overdue: number[] = [];
  const hb = startWorkerHeartbeat({
    workerId: 'w-1',
    transport: fakeTransport(state),
    clock,
    logger: memoryLogger(),
    onOverdue: (age) => overdue.push(age),
    ...(afterBeat === undefined ? {} : { afterBeat }),
  });
  hb.hold({ kind: OperationKind.TRANSFER, operationId: 'op', attempt: 1 }, { working() {} });
  return { clock, state, overdue, hb };
}

describe('the worker heartbeat’s age', () => {
  it('stays within the interval while beats land; past the timeout without one, the worker is told to fence itself', async () => {
    const { clock, state, overdue, hb } = simulatedHeartbeat();
    for (let i = 0; i < 20; i++) await clock.advance(100);
    expect(state.beats).toBeGreaterThan(10);
    expect(hb.age()).toBeLessThanOrEqual(100);
    expect(overdue).toEqual([]);

    state.failing = true;
    for (let i = 0; i < 9; i++) await clock.advance(100);
    expect(overdue).toEqual([]); // within the timeout: nothing yet
    for (let i = 0; i < 3; i++) await clock.advance(100);
    expect(hb.age()).toBeGreaterThan(1_000);
    expect(overdue.length).toBeGreaterThan(0);
    expect(overdue.every((age) => age > 1_000)).toBe(true);

    state.failing = false;
    await clock.advance(100);
    await clock.advance(100);
    expect(hb.age()).toBeLessThanOrEqual(100);
    await hb.stop({ remove: false });
  });

  it('goes on beating while the check after a beat hangs (a database restarting), one check at a time', async () => {
    let checks = 0;
    let release: () => void = () => {};
    const { clock, state, overdue, hb } = simulatedHeartbeat(() => {
      checks++;
      return new Promise<void>((resolve) => {
        release = resolve;
      });
    });
    // Twice the heartbeat timeout with the first check still waiting on its database.
    for (let i = 0; i < 20; i++) await clock.advance(100);
    expect(checks).toBe(1);
    expect(state.beats).toBeGreaterThan(10);
    expect(hb.age()).toBeLessThanOrEqual(100);
    expect(overdue).toEqual([]);
    // The database answers: the next beat checks again.
    release();
    await clock.advance(100);
    await clock.advance(100);
    expect(checks).toBe(2);
    release();
    await hb.stop({ remove: false });
  });
});
