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
 * heartbeats go to the heartbeat store, not through here, to keep the hot path light). It is an `@xstate/store`: what it holds can always be rebuilt from Postgres and
 * the heartbeat bucket, so losing it with the process loses nothing.
 *
 * @example
 * ```ts
 * const registry = createWorkerRegistry();
 * registry.trigger.leased({ lease });
 * registry.getSnapshot().context.leases[lease.operationId];
 * ```
 */
export function createWorkerRegistry() {
  return createStore({
    context: { leases: {} as Readonly<Record<string, Lease>> },
    on: {
      leased: (context, event: { lease: Lease }) => ({
        ...context,
        leases: { ...context.leases, [event.lease.operationId]: event.lease },
      }),
      abort: (context, event: { operationId: string; reason: string }, enq) => {
        const lease = context.leases[event.operationId];
        if (lease === undefined) return context;
        enq.effect(() => lease.abort.abort(new Error(event.reason)));
        return context;
      },
      released: (context, event: { operationId: string }) => {
        const { [event.operationId]: _gone, ...leases } = context.leases;
        return { ...context, leases };
      },
    },
  });
}

export type WorkerRegistry = ReturnType<typeof createWorkerRegistry>;
