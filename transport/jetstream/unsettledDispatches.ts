import type { JetStreamManager, MsgRequest } from '@nats-io/jetstream';
import { decodeDispatch } from '../DispatchMessage.ts';
import type { DispatchMessage } from '../Transport.ts';

/**
 * The dispatches of a work-queue stream that its consumers have handed out and not seen settled:
 * for each consumer, the messages of its subject between its ack floor and the last sequence it
 * delivered that are still stored (an acked or terminated message leaves a work queue). One
 * consumer list, then one read per such message; a consumer with nothing outstanding costs
 * nothing more.
 *
 * @example
 * ```ts
 * const held = await unsettledDispatches(jsm, 'opstate_dispatch', 4096);
 * ```
 */
export async function unsettledDispatches(
  jsm: JetStreamManager,
  stream: string,
  maxMessageBytes: number,
): Promise<DispatchMessage[]> {
  const out: DispatchMessage[] = [];
  for await (const consumer of jsm.consumers.list(stream)) {
    const subject = consumer.config.filter_subject;
    const last = consumer.delivered.stream_seq;
    if (subject === undefined || last <= consumer.ack_floor.stream_seq) continue;
    let seq = consumer.ack_floor.stream_seq + 1;
    while (seq <= last) {
      // next_by_subj: the first stored message of the subject at or after seq.
      const query = { seq, next_by_subj: subject } as unknown as MsgRequest;
      const stored = await jsm.streams.getMessage(stream, query);
      if (stored === null || stored.seq > last) break;
      const decoded = decodeDispatch(stored.data, maxMessageBytes);
      if (decoded.ok) out.push(decoded.message);
      seq = stored.seq + 1;
    }
  }
  return out;
}
