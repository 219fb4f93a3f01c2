import { createBatcher } from '../loops/Batcher.ts';
import type { OpstateError } from '../machines/OpstateError.ts';
import { type AppliedTransition, checkId, notFound } from '../persistence/applyEvents.ts';
import type { CompleteItem, Completion } from '../persistence/completeWithOutputs.ts';
import type { OperationRecord } from '../persistence/OperationRecord.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';

type StartItem = Parameters<OperationStore['applyManyTo']>[0][number];

/** The worker's hot-path reads and writes, each one call per operation, batched underneath. */
export interface WorkerBatches {
  /** The operation a dispatch names; `NOT_FOUND` / `BAD_INPUT` for an unknown or malformed id. */
  load(operationId: string): Promise<OperationRecord>;
  /** START on the row just loaded (compare-and-set on its version); throws the refusal. */
  start(item: StartItem): Promise<AppliedTransition>;
  /** Output copies and COMPLETE in one transaction; throws the refusal. */
  complete(item: CompleteItem): Promise<Completion>;
}

function unwrap<R extends { ok: boolean }>(result: R): Extract<R, { ok: true }> {
  if (!result.ok) throw (result as unknown as { error: OpstateError }).error;
  return result as Extract<R, { ok: true }>;
}

/**
 * Group commit for a worker: loads, STARTs and completions made while the previous one of their
 * kind is in flight go out together in the next, so N concurrent deliveries cost one statement of
 * each kind instead of N. At a trickle each goes out alone, without waiting. One batch of each
 * kind at a time: with two, a busy worker sent batches half the size (four to five times the
 * statements per operation) for the same work, and its CPU went to statements, not operations.
 *
 * @example
 * ```ts
 * const batches = createWorkerBatches(store, 16);
 * const op = await batches.load(message.operationId);
 * ```
 */
export function createWorkerBatches(store: OperationStore, concurrency: number): WorkerBatches {
  const max = Math.max(16, concurrency * 4);
  const loads = createBatcher(
    async (ids: string[]) => {
      const found = await store.loadMany(ids);
      return ids.map((i) => found.get(i) ?? notFound(i));
    },
    { max, inFlight: 1 },
  );
  const starts = createBatcher((items: StartItem[]) => store.applyManyTo(items), {
    max,
    inFlight: 1,
  });
  const completes = createBatcher((items: CompleteItem[]) => store.completeMany(items), {
    max,
    inFlight: 1,
  });
  return {
    async load(operationId) {
      checkId(operationId); // a malformed id fails alone, never its batch
      const r = await loads.submit(operationId);
      if (r instanceof Error) throw r;
      return r;
    },
    start: async (item) => unwrap(await starts.submit(item)),
    complete: async (item) => unwrap(await completes.submit(item)),
  };
}
