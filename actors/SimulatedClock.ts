import type { Clock } from './Clock.ts';

/** A clock whose time moves only when `advance` says so: loops wait on it without real timers. */
export interface SimulatedClock extends Clock {
  /** Moves time forward and wakes every sleeper whose deadline has come, in deadline order. */
  advance(ms: number): void;
  /** Sleepers still waiting. */
  readonly pending: number;
}

/**
 * A simulated clock for tests and drills: `sleep` resolves when `advance` reaches its deadline (or
 * its signal aborts), never by itself.
 *
 * @example
 * ```ts
 * const clock = createSimulatedClock();
 * const slept = clock.sleep(1_000);
 * clock.advance(1_000); // `slept` resolves now
 * ```
 */
export function createSimulatedClock(start = Date.parse('2030-01-01T00:00:00Z')): SimulatedClock {
  let now = start;
  const sleepers = new Set<{ at: number; wake: () => void }>();
  return {
    now: () => now,
    sleep(ms, signal) {
      return new Promise<void>((resolve) => {
        if (signal?.aborted) return resolve();
        const sleeper = {
          at: now + Math.max(0, ms),
          wake: () => {
            sleepers.delete(sleeper);
            signal?.removeEventListener('abort', sleeper.wake);
            resolve();
          },
        };
        sleepers.add(sleeper);
        signal?.addEventListener('abort', sleeper.wake, { once: true });
      });
    },
    advance(ms) {
      now += ms;
      const due = [...sleepers].filter((s) => s.at <= now).sort((a, b) => a.at - b.at);
      for (const s of due) s.wake();
    },
    get pending() {
      return sleepers.size;
    },
  };
}
