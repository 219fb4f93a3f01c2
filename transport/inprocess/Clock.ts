/**
 * Time as the in-process transport sees it. Real timers by default; tests may inject a clock they
 * advance by hand.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The wall clock and Node's timers.
 *
 * @example
 * ```ts
 * createInProcessTransport({ clock: realClock });
 * ```
 */
export const realClock: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
  clearTimeout: (handle: unknown) => clearTimeout(handle as ReturnType<typeof setTimeout>),
});
