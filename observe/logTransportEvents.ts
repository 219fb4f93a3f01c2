import type { Clock } from '../machines/Clock.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import { queueName } from '../machines/routing.ts';
import type { Transport, TransportEvent } from '../transport/Transport.ts';
import type { Logger, LogLevel } from './Logger.ts';

/** The same complaint (event type and reason) is logged at most once per this window. */
const REPEAT_WINDOW_MS = 10_000;

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The log line for one transport event: level, message, fields, and what makes it "the same". */
function describe(event: TransportEvent): {
  message: string;
  fields: Record<string, unknown>;
  same: string;
  level?: LogLevel;
} {
  switch (event.type) {
    case 'rejected':
      return {
        message: 'dispatch message rejected and terminated',
        fields: {
          subject: event.subject,
          reason: event.reason,
          size: event.size,
          preview: event.preview,
        },
        same: `rejected:${event.subject}:${event.reason.slice(0, 40)}`,
      };
    case 'max_deliveries':
      return {
        message: `dispatch given up after ${event.deliveries} deliveries and removed; the database still has the operation (the monitor or reconciler re-dispatches it)`,
        fields: {
          subject: event.subject,
          deliveries: event.deliveries,
          ...(event.message === undefined
            ? { reason: 'the message could not be read back' }
            : { operationId: event.message.operationId, attempt: event.message.attempt }),
        },
        same: `max:${event.subject}:${event.message?.operationId ?? 'unreadable'}`,
      };
    case 'handler_error': {
      const kind = classifyFailure(event.error);
      return {
        message:
          kind === 'outage'
            ? 'dispatch not handled: the database or broker is unreachable; it is redelivered'
            : 'dispatch not handled; it is redelivered',
        fields: {
          queue: queueName(event.route),
          operationId: event.message.operationId,
          attempt: event.message.attempt,
          err: event.error,
          retryInMs: event.retryInMs,
        },
        same: `handler:${kind}:${kind === 'outage' ? '' : messageOf(event.error).slice(0, 60)}`,
      };
    }
    case 'heartbeat_refused':
      return {
        message:
          'worker heartbeat refused; it counts for nothing, so that worker looks dead to the control plane',
        fields: { key: event.key, size: event.size, reason: event.reason },
        same: `heartbeat:${event.key}`,
      };
    case 'waiting_for_control_plane':
      return {
        message: `waiting for the control plane to create ${event.missing} ${event.name}`,
        fields: { queue: queueName(event.route), [event.missing]: event.name },
        same: `waiting:${event.missing}:${event.name}`,
        level: 'INFO',
      };
    case 'consume_error':
      return {
        message: 'pulling dispatches failed; retrying with backoff',
        fields: { queue: queueName(event.route), err: event.error },
        same: `consume:${queueName(event.route)}`,
      };
    case 'disconnected':
      return { message: 'broker connection lost; reconnecting', fields: {}, same: 'disconnected' };
    case 'reconnected':
      return { message: 'broker connection restored', fields: {}, same: 'reconnected' };
  }
}

/**
 * Logs every transport event at WARNING (a queue waiting for the control plane to create its
 * stream or consumer at INFO, once): a rejected message (subject, reason, size and a short
 * printable prefix, never the payload), a max-delivery drop, a delivery a handler could not
 * handle, a refused heartbeat (its key, size and why), a failed pull, a disconnect and a
 * reconnect. The same complaint repeated within ten
 * seconds is logged once, with how many were folded into the next line. Returns the unsubscribe
 * function.
 *
 * @example
 * ```ts
 * const off = logTransportEvents(transport, logger, systemClock);
 * ```
 */
export function logTransportEvents(transport: Transport, logger: Logger, clock: Clock): () => void {
  const last = new Map<string, { at: number; folded: number }>();
  return transport.onEvent((event) => {
    const { message, fields, same, level } = describe(event);
    const now = clock.now();
    const seen = last.get(same);
    if (seen !== undefined && now - seen.at < REPEAT_WINDOW_MS) {
      seen.folded++;
      return;
    }
    last.set(same, { at: now, folded: 0 });
    if (last.size > 1000) last.clear();
    const folded = seen?.folded ?? 0;
    logger.log(
      level ?? 'WARNING',
      message,
      folded > 0 ? { ...fields, repeatsSinceLastLine: folded } : fields,
    );
  });
}
