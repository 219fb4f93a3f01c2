import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription as NatsSubscription } from '@nats-io/transport-node';
import { allRoutes, queueName, type Route } from '../../machines/routing.ts';
import { decodeDispatch } from '../DispatchMessage.ts';
import type { TransportEventHub } from '../TransportEventHub.ts';
import type { TransportNames } from '../TransportNames.ts';

interface MaxDeliveriesAdvisory {
  stream?: string;
  consumer?: string;
  stream_seq?: number;
  deliveries?: number;
}

/**
 * What we do with a message that used up `maxDeliver`: on nats-server 2.9 it would otherwise
 * stay in the work-queue stream for ever, counted as ack-pending. We listen to the server's
 * `MAX_DELIVERIES` advisory (in a queue group, so one process per deployment acts), read the
 * message, delete it from the stream and emit a `max_deliveries` event carrying it. The database
 * stays the source of truth: the reconciler resets the operation, which is re-dispatched under a
 * new attempt. An advisory sent while no process listens is missed; that message then stays
 * until an operator removes it (`nats stream rmm`).
 *
 * @example
 * ```ts
 * const watcher = new MaxDeliveriesWatcher(nc, jsm, names, hub, 4096); watcher.start();
 * ```
 */
export class MaxDeliveriesWatcher {
  #sub: NatsSubscription | undefined;
  readonly #routes = new Map<string, Route>(allRoutes().map((r) => [queueName(r), r]));

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly names: TransportNames,
    private readonly hub: TransportEventHub,
    private readonly maxMessageBytes: number,
  ) {}

  /** Starts listening (idempotent). */
  start(): void {
    if (this.#sub) return;
    this.#sub = this.nc.subscribe(
      `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${this.names.stream}.*`,
      {
        queue: `${this.names.prefix}_max_deliveries`,
        callback: (err, msg) => {
          if (err) return;
          let advisory: MaxDeliveriesAdvisory;
          try {
            advisory = msg.json<MaxDeliveriesAdvisory>();
          } catch {
            return;
          }
          void this.#handle(advisory);
        },
      },
    );
  }

  stop(): void {
    this.#sub?.unsubscribe();
    this.#sub = undefined;
  }

  async #handle(advisory: MaxDeliveriesAdvisory): Promise<void> {
    const seq = advisory.stream_seq;
    const route = this.#routes.get(advisory.consumer ?? '');
    if (typeof seq !== 'number' || !route) return;
    try {
      const stored = await this.jsm.streams.getMessage(this.names.stream, { seq });
      if (!stored) return; // acked or removed meanwhile
      const decoded = decodeDispatch(stored.data, this.maxMessageBytes);
      await this.jsm.streams.deleteMessage(this.names.stream, seq, false);
      this.hub.emit({
        type: 'max_deliveries',
        route,
        subject: stored.subject,
        message: decoded.ok ? decoded.message : undefined,
        deliveries: advisory.deliveries ?? 0,
      });
    } catch {
      // Gone already (acked, or another process removed it), or the broker is away: nothing to do.
    }
  }
}
