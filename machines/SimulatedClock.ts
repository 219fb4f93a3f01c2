import { type Clock, sleepOn, type TimerHandle } from './Clock.ts';

interface Timer {
  readonly id: number;
  readonly at: number;
  readonly fn: () => void;
}

/** Lets every callback and promise continuation queued so far run (one turn of the event loop). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A clock that moves only when a test says so. Timers fire in time order (ties in the order they
 * were set) as `advance` passes their time, and after each one the promise continuations it caused
 * run before the next fires, so a loop that sleeps, wakes, works on in-memory fakes and sleeps again
 * behaves as it would in real time — in microseconds, and the same way every run.
 *
 * Code that waits on real I/O (a database, a broker) between two sleeps is not settled by
 * `advance`: wait for it with a condition (e.g. until `sleepers` is back to what it was) before
 * advancing again.
 *
 * @example
 * ```ts
 * const clock = new SimulatedClock();
 * const loop = startLoop({ name: 'monitor', intervalMs: 1000, pass, clock, logger });
 * await clock.advance(1000); // exactly one more pass
 * await loop.stop();
 * ```
 */
export class SimulatedClock implements Clock {
  #now: number;
  #next = 1;
  readonly #timers = new Map<number, Timer>();

  /** Starts at `start` (ms since the epoch; default 2030-01-01T00:00:00Z). */
  constructor(start = Date.UTC(2030, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#next++;
    const delay = Number.isFinite(ms) && ms > 0 ? ms : 0;
    this.#timers.set(id, { id, at: this.#now + delay, fn });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    if (typeof handle === 'number') this.#timers.delete(handle);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Timers set and not yet fired or cleared (each pending `sleep` is one). */
  get pending(): number {
    return this.#timers.size;
  }

  /** When the next timer is due, or undefined when none is set. */
  get nextAt(): number | undefined {
    return this.#earliest()?.at;
  }

  /**
   * Moves time forward by `ms`, firing every timer due on the way at its own time, and lets what
   * they set off run (including timers they set that fall within the same span).
   */
  async advance(ms: number): Promise<void> {
    await this.advanceTo(this.#now + Math.max(0, ms));
  }

  /** Moves time forward to `time` (never back), as `advance` does. */
  async advanceTo(time: number): Promise<void> {
    await settle();
    for (;;) {
      const timer = this.#earliest();
      if (timer === undefined || timer.at > time) break;
      this.#timers.delete(timer.id);
      this.#now = Math.max(this.#now, timer.at);
      timer.fn();
      await settle();
    }
    this.#now = Math.max(this.#now, time);
    await settle();
  }

  /** Fires the next timer whatever its time (moving time to it); false when none is set. */
  async runNext(): Promise<boolean> {
    await settle();
    const timer = this.#earliest();
    if (timer === undefined) return false;
    await this.advanceTo(timer.at);
    return true;
  }

  #earliest(): Timer | undefined {
    let first: Timer | undefined;
    for (const t of this.#timers.values()) {
      if (first === undefined || t.at < first.at || (t.at === first.at && t.id < first.id)) {
        first = t;
      }
    }
    return first;
  }
}

/**
 * A `SimulatedClock` starting at `start` (ms since the epoch; default 2030-01-01T00:00:00Z).
 *
 * @example
 * ```ts
 * import { createSimulatedClock } from 'opstate/testing';
 * const clock = createSimulatedClock();
 * const slept = clock.sleep(1_000);
 * await clock.advance(1_000); // `slept` has resolved
 * ```
 */
export function createSimulatedClock(start?: number): SimulatedClock {
  return new SimulatedClock(start);
}
