import { describe, expect, it } from 'vitest';
import { createSimulatedClock } from '../../actors/SimulatedClock.ts';

describe('createSimulatedClock', () => {
  it('wakes sleepers only when time is advanced past their deadline, in deadline order', async () => {
    const clock = createSimulatedClock(1_000);
    const woke: string[] = [];
    const late = clock.sleep(300).then(() => woke.push('late'));
    const early = clock.sleep(100).then(() => woke.push('early'));
    clock.advance(99);
    await Promise.resolve();
    expect(woke).toEqual([]);
    expect(clock.pending).toBe(2);
    clock.advance(250);
    await Promise.all([early, late]);
    expect(woke).toEqual(['early', 'late']);
    expect(clock.now()).toBe(1_349);
    expect(clock.pending).toBe(0);
  });

  it('lets an abort signal end a sleep early', async () => {
    const clock = createSimulatedClock();
    const controller = new AbortController();
    const slept = clock.sleep(60_000, controller.signal);
    controller.abort();
    await slept;
    expect(clock.pending).toBe(0);
  });
});
