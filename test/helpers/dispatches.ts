import type { OperationStore } from '../../persistence/OperationStore.ts';
import type { OutboxEntry } from '../../persistence/OutboxEntry.ts';
import { waitFor } from './waitFor.ts';

/** The relay's barrier, asked again until no dispatch write is open (it never waits itself). */
export async function barrierNow(store: OperationStore): Promise<number> {
  let upTo: number | undefined;
  await waitFor(async () => {
    upTo = await store.dispatchBarrier();
    return upTo !== undefined;
  }, 'no dispatch write open: the relay’s barrier granted');
  return upTo as number;
}

/**
 * Every committed dispatch the relay has not passed yet, as its next pass would read them: the
 * SCHEDULE transitions past its cursor, up to the barrier, stale ones included.
 */
export async function dispatchesAhead(store: OperationStore): Promise<OutboxEntry[]> {
  const { after } = await store.relayPosition();
  return store.fetchDispatches(after, await barrierNow(store), 100_000);
}
