import type { JetStreamManager, MsgRequest } from '@nats-io/jetstream';
import { decodeDispatch } from '../DispatchMessage.ts';
import type { WaitingDispatch, WaitingDispatches } from '../Transport.ts';

/**
 * Of the dispatches `wanted` (operation id → attempt), those a work-queue stream still stores
 * past the last message their queue's consumer handed out: waiting their turn, never delivered.
 * One consumer list; then, for each consumer with messages not yet delivered, one read per message
 * from the first of them on, until every wanted dispatch is found or `maxReads` messages have been
 * read in all. A consumer delivers in stream order, so what has waited longest is read first.
 *
 * @example
 * ```ts
 * const { found } = await waitingDispatches(jsm, 'opstate_dispatch', new Map([[id, 1]]), 4096, 20_000);
 * ```
 */
export async function waitingDispatches(
  jsm: JetStreamManager,
  stream: string,
  wanted: ReadonlyMap<string, number>,
  maxMessageBytes: number,
  maxReads: number,
): Promise<WaitingDispatches> {
  const found: WaitingDispatch[] = [];
  if (wanted.size === 0) return { found, complete: true };
  let reads = 0;
  for await (const consumer of jsm.consumers.list(stream)) {
    const subject = consumer.config.filter_subject;
    if (subject === undefined || consumer.num_pending === 0) continue;
    let seq = consumer.delivered.stream_seq + 1;
    while (found.length < wanted.size) {
      if (reads >= maxReads) return { found, complete: false };
      reads++;
      // next_by_subj: the first stored message of the subject at or after seq.
      const query = { seq, next_by_subj: subject } as unknown as MsgRequest;
      const stored = await jsm.streams.getMessage(stream, query);
      if (stored === null) break;
      const decoded = decodeDispatch(stored.data, maxMessageBytes);
      if (decoded.ok && wanted.get(decoded.message.operationId) === decoded.message.attempt) {
        found.push({ message: decoded.message, queue: consumer.name });
      }
      seq = stored.seq + 1;
    }
    if (found.length === wanted.size) break;
  }
  return { found, complete: true };
}
