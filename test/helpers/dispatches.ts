import type { OperationStore } from '../../persistence/OperationStore.ts';
import type { OutboxEntry } from '../../persistence/OutboxEntry.ts';

/**
 * Every committed dispatch the relay has not passed yet, as its next pass would read them: the
 * SCHEDULE transitions past its cursor, up to the barrier, stale ones included.
 */
export async function dispatchesAhead(store: OperationStore): Promise<OutboxEntry[]> {
  const { after } = await store.relayPosition();
  const upTo = await store.dispatchBarrier();
  return store.fetchDispatches(after, upTo, 100_000);
}
