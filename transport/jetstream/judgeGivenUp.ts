/** What the broker says of the consumer an advisory names, and of the message it names. */
export interface GivenUpEvidence {
  /** The stream sequence the advisory names. */
  readonly seq: number;
  /** The subject of the message stored at `seq`; undefined when none is stored (settled). */
  readonly storedSubject: string | undefined;
  /** The subject the consumer reads (its filter). */
  readonly consumerSubject: string;
  /** The consumer's last delivered stream sequence. */
  readonly deliveredSeq: number;
  /**
   * The consumer's ack floor (stream sequence): nothing at or below it is outstanding (it was
   * acked, or given up: nats-server moves the floor past a given-up message).
   */
  readonly ackFloorSeq: number;
  /** Messages the consumer has handed out and not seen settled (`num_ack_pending`). */
  readonly ackPending: number;
}

/** What to do about a `MAX_DELIVERIES` advisory. */
export type GivenUpVerdict =
  /** The message is not (or no longer) one the consumer gave up: leave it, forget the advisory. */
  | { readonly action: 'ignore'; readonly reason: string }
  /** The broker's state proves the consumer gave the message up: remove it from the stream. */
  | { readonly action: 'remove' }
  /** It may be given up or still held: leave it and look again later. */
  | { readonly action: 'wait' };

/**
 * Whether the message a `MAX_DELIVERIES` advisory names was really given up by its consumer, pure,
 * judged on the broker's own state, never on the advisory's word (any client may publish one).
 * A work-queue message leaves the stream when it is acked or terminated; one the consumer gave up
 * stays stored, on the consumer's subject, delivered (at or below its last delivered sequence),
 * and is no longer outstanding: nats-server (checked on 2.9.10) stops counting it as ack-pending once
 * it used up `max_deliver`, and moves the ack floor past it once what came before is acked.
 * nats-server tells no client which sequences are outstanding, only how many and the floor, so a
 * stored, delivered message is proven given up when it is at or below the ack floor, or when the
 * consumer has nothing outstanding at all. Otherwise the verdict is to wait and look again: a live
 * message (held by a worker, or waiting to be redelivered) is outstanding until it is settled, so
 * it is never removed; a given-up one is removed at a later look, and meanwhile it is never
 * delivered again.
 *
 * @example
 * ```ts
 * judgeGivenUp({ seq: 42, storedSubject, consumerSubject, deliveredSeq: 50, ackFloorSeq: 40,
 *   ackPending: 0 }); // { action: 'remove' }
 * ```
 */
export function judgeGivenUp(e: GivenUpEvidence): GivenUpVerdict {
  if (e.storedSubject === undefined) return { action: 'ignore', reason: 'no longer stored' };
  if (e.storedSubject !== e.consumerSubject) {
    return { action: 'ignore', reason: 'the message is not on the consumer’s subject' };
  }
  if (e.seq > e.deliveredSeq) {
    return { action: 'ignore', reason: 'the consumer has not delivered it yet' };
  }
  if (e.seq <= e.ackFloorSeq || e.ackPending === 0) return { action: 'remove' };
  return { action: 'wait' };
}
