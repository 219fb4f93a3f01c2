/**
 * Crash-drill hooks, kept off the public types: a worker's or deleter's fault points travel in
 * its options under a symbol only `withFaults` sets, and its crash is reached only through
 * `crash`. Both are exported from `opstate/testing`, never from the public entry, so a service
 * cannot set a fault point or crash a worker by accident.
 */

const FAULTS = Symbol('opstate.faults');
const CRASH = Symbol('opstate.crash');

/**
 * Options that carry fault points, to spread into a worker's or a copy deleter's options.
 * `undefined` gives nothing to spread.
 *
 * @example
 * ```ts
 * runtime.startWorker({ kinds, handlers, ...withFaults({ afterStart: crashHere }) });
 * ```
 */
export function withFaults<F extends object>(faults: F | undefined): object {
  return faults === undefined ? {} : { [FAULTS]: faults };
}

/** The fault points `withFaults` put into these options, if any. */
export function faultsOf<F extends object>(options: object): F | undefined {
  return (options as { [FAULTS]?: F })[FAULTS];
}

/** Gives `target` a crash that `crash(target)` reaches (not enumerable, not copied by spread). */
export function crashable<T extends object>(target: T, crashIt: () => Promise<void>): T {
  Object.defineProperty(target, CRASH, { value: crashIt });
  return target;
}

/**
 * Makes a worker or copy deleter of this runtime die as a killed process would, for drills in
 * one process (a worker's heartbeat stops where it is and its deliveries stay unsettled; a
 * deleter unlinks and writes nothing more and its lease runs out). Recovery is then the
 * runtime's, as after a real kill.
 *
 * @example
 * ```ts
 * await crash(worker);
 * ```
 */
export function crash(target: object): Promise<void> {
  const crashIt = (target as { [CRASH]?: () => Promise<void> })[CRASH];
  if (crashIt === undefined) {
    return Promise.reject(
      new TypeError('crash(): not a worker or copy deleter of an opstate runtime'),
    );
  }
  return crashIt();
}
