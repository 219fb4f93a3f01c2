import { createStore } from '@xstate/store';
import type { OperationKind } from '../machines/OperationKind.ts';

/** One operation this worker process is running now. Local and never durable. */
export interface Lease {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly attempt: number;
  /** Identifies this run in the heartbeat bucket: `<kind>.<operationId>.<taskId>`. */
  readonly taskId: string;
  readonly startedAt: number;
  /** Aborts the handler's `signal` (reset, cancel, or worker stop). */
  readonly abort: AbortController;
}

/**
 * The worker's in-memory registry of in-flight operations (leases and their abort controllers;
 * heartbeats go to the heartbeat store, not through here, to keep the hot path light). It is an
 * `@xstate/store`: what it holds can always be rebuilt from Postgres and the heartbeat bucket, so
 * losing it with the process loses nothing.
 *
 * The leases live in one `Map` that only the store's own transitions change, in place: leasing or
 * releasing costs O(1) whatever the number in flight (copying a record of hundreds of leases at
 * every start and finish was a large share of a busy worker's time and garbage). Each transition
 * still produces a new context object, so subscribers see every change; read the map, never keep
 * it as a snapshot of the past.
 *
 * @example
 * ```ts
 * const registry = createWorkerRegistry();
 * registry.trigger.leased({ lease });
 * registry.getSnapshot().context.leases.get(lease.operationId);
 * registry.trigger.released({ operationId: lease.operationId, attempt: lease.attempt });
 * ```
 */
export function createWorkerRegistry() {
  return createStore({
    context: { leases: new Map<string, Lease>() as ReadonlyMap<string, Lease> },
    on: {
      leased: (context, event: { lease: Lease }) => {
        (context.leases as Map<string, Lease>).set(event.lease.operationId, event.lease);
        return { leases: context.leases };
      },
      // Both fenced on the attempt: a lease is replaced when the next attempt of its operation
      // starts here while the last one's handler has not returned (it hangs past its deadline),
      // and what was meant for the old attempt must not reach the new one.
      abort: (context, event: { operationId: string; attempt: number; reason: string }, enq) => {
        const lease = context.leases.get(event.operationId);
        if (lease === undefined || lease.attempt !== event.attempt) return context;
        enq.effect(() => lease.abort.abort(new Error(event.reason)));
        return context;
      },
      released: (context, event: { operationId: string; attempt: number }) => {
        const lease = context.leases.get(event.operationId);
        if (lease === undefined || lease.attempt !== event.attempt) return context;
        (context.leases as Map<string, Lease>).delete(event.operationId);
        return { leases: context.leases };
      },
    },
  });
}

export type WorkerRegistry = ReturnType<typeof createWorkerRegistry>;
