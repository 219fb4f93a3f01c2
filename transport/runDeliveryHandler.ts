import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { dispatchMsgId } from './DispatchMessage.ts';
import type { SettlingDelivery } from './SettlingDelivery.ts';
import type { DeliveryHandler } from './Transport.ts';
import type { TransportEventHub } from './TransportEventHub.ts';

/**
 * Runs a handler on one delivery and never rejects. A handler that throws, or returns without
 * settling, gets its delivery nak()ed after `nakDelayMs` and a `handler_error` event.
 *
 * @example
 * ```ts
 * await runDeliveryHandler(handler, delivery, hub, 1000);
 * ```
 */
export async function runDeliveryHandler(
  handler: DeliveryHandler,
  delivery: SettlingDelivery,
  hub: TransportEventHub,
  nakDelayMs: number,
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
  delivery.nak(nakDelayMs);
  hub.emit({ type: 'handler_error', route: delivery.route, message: delivery.message, error });
}
