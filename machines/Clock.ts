/** What `Clock.setTimeout` returns: pass it back to `clearTimeout`, never look inside. */
export type TimerHandle = unknown;

/**
 * Time as the runtime sees it: the one place where opstate reads the time or waits. Every loop
 * that waits (scheduler, relay, heartbeat monitor, reconciler, circuit breaker, leadership, worker
 * heartbeats, start-up backoff) and the in-process transport's timers (ack-wait, delayed naks) take
 * a `Clock`, so a test can drive time with a `SimulatedClock` instead of sleeping.
 *
 * @example
 * ```ts
 * const started = clock.now();
 * await clock.sleep(250, stop.signal); // resolves early, without rejecting, when stop aborts
 * const timer = clock.setTimeout(() => redeliver(), ackWaitMs);
 * clock.clearTimeout(timer);
 * ```
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`, or early (without rejecting) when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `fn` once after `ms`. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Cancels a timer; harmless for one that fired, was cancelled, or is undefined. */
  clearTimeout(handle: TimerHandle): void;
}

/**
 * `sleep` on top of a clock's own timers: resolves after `ms`, or at once when `signal` aborts.
 *
 * @example
 * ```ts
 * const clock = { now, setTimeout, clearTimeout, sleep: (ms, s) => sleepOn(clock, ms, s) };
 * ```
 */
export function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clock.clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * The wall clock and Node's timers. Also what bounds real I/O whatever clock a runtime was given
 * (a query that never answers, a connection that does not flush): those waits are on the network,
 * not on the runtime's notion of time.
 *
 * @example
 * ```ts
 * const runtime = await createRuntime({ clock: systemClock }); // the default
 * ```
 */
export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout: (fn: () => void, ms: number): TimerHandle => setTimeout(fn, ms),
  clearTimeout: (handle: TimerHandle) => {
    if (handle !== undefined) clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
  sleep: (ms: number, signal?: AbortSignal) => sleepOn(systemClock, ms, signal),
});
