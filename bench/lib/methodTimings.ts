/** Profile mode: the calls and time of a runtime's hot-path methods, wrapped in place. */
import type { Runtime } from '../../runtime/Runtime.ts';
import { PROFILE } from './statementCounter.ts';

/** Calls and milliseconds spent per wrapped method (profile mode). */
export type Timings = Map<string, { calls: number; ms: number }>;

/** Wraps `obj[method]` (an async method) to add its calls and time to `timings` under `label`. */
export function timeMethod(timings: Timings, obj: object, method: string, label: string): void {
  const target = obj as Record<string, (...args: unknown[]) => unknown>;
  const original = target[method]?.bind(obj);
  if (original === undefined) return;
  target[method] = (...args: unknown[]) => {
    const t = performance.now();
    const done = () => {
      const slot = timings.get(label) ?? { calls: 0, ms: 0 };
      slot.calls++;
      slot.ms += performance.now() - t;
      timings.set(label, slot);
    };
    const result = original(...args);
    if (result instanceof Promise) return result.finally(done);
    done();
    return result;
  };
}

/** Times the worker's hot path: store calls, heartbeat puts/deletes, the handler, the ack. */
export function timeRuntime(runtime: Runtime, timings: Timings, role: 'worker' | 'plane'): void {
  if (!PROFILE) return;
  const store = runtime.store as unknown as object;
  if (role === 'worker') {
    for (const m of [
      'load',
      'apply',
      'applyTo',
      'complete',
      'loadMany',
      'applyManyTo',
      'completeMany',
    ])
      timeMethod(timings, store, m, `store.${m}`);
    timeMethod(timings, runtime.transport.heartbeats, 'put', 'heartbeats.put');
    timeMethod(timings, runtime.transport.heartbeats, 'delete', 'heartbeats.delete');
    const consume = runtime.transport.consume.bind(runtime.transport);
    (runtime.transport as { consume: typeof consume }).consume = (route, opts, handler) =>
      consume(route, opts, (d) => {
        timeMethod(timings, d, 'ack', 'delivery.ack');
        const t = performance.now();
        return Promise.resolve(handler(d)).finally(() => {
          const slot = timings.get('onDelivery (whole)') ?? { calls: 0, ms: 0 };
          slot.calls++;
          slot.ms += performance.now() - t;
          timings.set('onDelivery (whole)', slot);
        });
      });
  } else {
    for (const m of [
      'claimDue',
      'relayPosition',
      'dispatchBarrier',
      'fetchDispatches',
      'saveRelayCursor',
    ])
      timeMethod(timings, store, m, `store.${m}`);
    timeMethod(timings, runtime.transport, 'publishMany', 'transport.publishMany');
  }
}

/** Profile mode: each wrapped method's calls and mean time per operation; clears `timings`. */
export function printTimings(label: string, timings: Timings, n: number): void {
  if (!PROFILE) return;
  for (const [k, v] of timings) {
    process.stderr.write(
      `[e2e timing ${label}] ${k}: ${(v.calls / n).toFixed(3)} calls/op, mean ${(v.ms / v.calls).toFixed(2)} ms, total ${Math.round(v.ms)} ms\n`,
    );
  }
  timings.clear();
}
