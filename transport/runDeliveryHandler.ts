import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { dispatchMsgId } from './DispatchMessage.ts';
import type { SettlingDelivery } from './SettlingDelivery.ts';
import type { DeliveryHandler } from './Transport.ts';
import type { TransportEventHub } from './TransportEventHub.ts';

/** How long a failed delivery waits before it is delivered again. */
export interface NakBackoff {
  /** The wait after the first failed delivery. */
  readonly baseMs: number;
  /** The longest wait, however many deliveries have failed. */
  readonly maxMs: number;
}

/**
 * The wait before the next delivery of a message whose `deliveryCount`-th delivery failed: the
 * base, doubled per earlier delivery, at most `maxMs`. A failure that lasts (the database down
 * for minutes) then spends the message's `maxDeliver` deliveries over minutes instead of seconds,
 * so the message is still queued when the outage ends and the operation does not wait for the
 * reconciler's floor.
 *
 * @example
 * ```ts
 * nakDelayAfter(1, { baseMs: 1000, maxMs: 60_000 }); // 1000
 * nakDelayAfter(4, { baseMs: 1000, maxMs: 60_000 }); // 8000
 * nakDelayAfter(9, { baseMs: 1000, maxMs: 60_000 }); // 60000
 * ```
 */
export function nakDelayAfter(deliveryCount: number, backoff: NakBackoff): number {
  const earlier = Number.isFinite(deliveryCount) ? Math.trunc(deliveryCount) - 1 : 0;
  const doublings = Math.min(Math.max(earlier, 0), 30);
  return Math.min(backoff.baseMs * 2 ** doublings, Math.max(backoff.maxMs, backoff.baseMs));
}

/**
 * Runs a handler on one delivery and never rejects. A handler that throws, or returns without
 * settling, gets its delivery nak()ed after `nakDelayAfter(deliveryCount, backoff)` and a
 * `handler_error` event that says when it comes back.
 *
 * @example
 * ```ts
 * await runDeliveryHandler(handler, delivery, hub, { baseMs: 1000, maxMs: 60_000 });
 * ```
 */
export async function runDeliveryHandler(
  handler: DeliveryHandler,
  delivery: SettlingDelivery,
  hub: TransportEventHub,
  backoff: NakBackoff,
): Promise<void> {
  let error: unknown;
  try {
    await handler(delivery);
    if (delivery.settled) return;
    error = new OpstateError(
      OpstateErrorCode.TRANSPORT,
      `Handler returned without settling dispatch ${dispatchMsgId(delivery.message)}: ` +
        'call ack(), nak() or term() before the handler resolves.',
      { details: { operationId: delivery.message.operationId } },
    );
  } catch (err) {
    error = err;
  }
  const retryInMs = nakDelayAfter(delivery.deliveryCount, backoff);
  delivery.nak(retryInMs);
  hub.emit({
    type: 'handler_error',
    route: delivery.route,
    message: delivery.message,
    error,
    retryInMs,
  });
}
