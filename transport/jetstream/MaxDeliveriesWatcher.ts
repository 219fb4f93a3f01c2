import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription as NatsSubscription } from '@nats-io/transport-node';
import { type Clock, systemClock, type TimerHandle } from '../../machines/Clock.ts';
import { queueName, type Route, routeOfQueue } from '../../machines/routing.ts';
import { decodeDispatch } from '../DispatchMessage.ts';
import type { TransportEventHub } from '../TransportEventHub.ts';
import type { TransportNames } from '../TransportNames.ts';
import { judgeGivenUp } from './judgeGivenUp.ts';

interface MaxDeliveriesAdvisory {
  stream?: unknown;
  consumer?: unknown;
  stream_seq?: unknown;
  deliveries?: unknown;
}

/** A message an advisory named that may be given up: looked at again until it is settled. */
interface Suspect {
  readonly route: Route;
  readonly seq: number;
  readonly deliveries: number;
}

/** How often suspects are looked at again [5 s], and how many are kept at most [1000]. */
export interface WatcherPacing {
  readonly recheckMs: number;
  readonly maxSuspects: number;
  readonly clock: Clock;
}

const DEFAULT_PACING: WatcherPacing = { recheckMs: 5_000, maxSuspects: 1_000, clock: systemClock };

/**
 * What we do with a message that used up `maxDeliver`: on nats-server 2.9 it would otherwise
 * stay in the work-queue stream for ever. We listen to the server's `MAX_DELIVERIES` advisory (in
 * a queue group, so one process per deployment acts), but never take its word: any client may
 * publish one. Before anything is removed, the broker's own state must prove the message given up
 * (`judgeGivenUp`): stored on the consumer's subject, delivered, and at or below the consumer's ack
 * floor or with the consumer having nothing outstanding. Until then it is looked at again every
 * `recheckMs` (it is never delivered again meanwhile); once proven, it is deleted and a
 * `max_deliveries` event carries it. A forged advisory naming a live message changes nothing:
 * that message is outstanding until it is settled. The database stays the source of truth: the
 * reconciler resets the operation, which is re-dispatched under a new attempt. An advisory sent
 * while no process listens is missed; that message then stays until an operator removes it
 * (`nats stream rmm`).
 *
 * @example
 * ```ts
 * const watcher = new MaxDeliveriesWatcher(nc, jsm, names, hub, 4096); watcher.start();
 * ```
 */
export class MaxDeliveriesWatcher {
  #sub: NatsSubscription | undefined;
  readonly #suspects = new Map<string, Suspect>();
  readonly #pacing: WatcherPacing;
  #timer: TimerHandle;
  #looking: Promise<void> | undefined;
  #judged = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly names: TransportNames,
    private readonly hub: TransportEventHub,
    private readonly maxMessageBytes: number,
    pacing: Partial<WatcherPacing> = {},
  ) {
    this.#pacing = { ...DEFAULT_PACING, ...pacing };
  }

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
          this.#onAdvisory(advisory);
        },
      },
    );
  }

  stop(): void {
    this.#sub?.unsubscribe();
    this.#sub = undefined;
    this.#pacing.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#suspects.clear();
  }

  /** Suspects still waiting to be proven given up or settled (tests). */
  get suspects(): number {
    return this.#suspects.size;
  }

  /** How many times a suspect was judged on the broker's state (tests). */
  get judged(): number {
    return this.#judged;
  }

  #onAdvisory(advisory: MaxDeliveriesAdvisory): void {
    const { stream_seq: seq, consumer, deliveries } = advisory;
    const route = typeof consumer === 'string' ? routeOfQueue(consumer) : undefined;
    if (advisory.stream !== this.names.stream || route === undefined) return;
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) return;
    const key = `${queueName(route)}:${seq}`;
    if (this.#suspects.has(key)) return;
    if (this.#suspects.size >= this.#pacing.maxSuspects) return; // a flood of advisories
    const count =
      typeof deliveries === 'number' && Number.isSafeInteger(deliveries) ? deliveries : 0;
    this.#suspects.set(key, { route, seq, deliveries: count });
    void this.#look();
  }

  /** Looks at every suspect once (one pass at a time), then again later while any is left. */
  #look(): Promise<void> {
    this.#looking ??= (async () => {
      try {
        for (const [key, suspect] of [...this.#suspects]) {
          if (!this.#sub) return;
          if ((await this.#judge(suspect)) !== 'wait') this.#suspects.delete(key);
        }
      } finally {
        this.#looking = undefined;
        if (this.#sub && this.#suspects.size > 0 && this.#timer === undefined) {
          this.#timer = this.#pacing.clock.setTimeout(() => {
            this.#timer = undefined;
            void this.#look();
          }, this.#pacing.recheckMs);
        }
      }
    })();
    return this.#looking;
  }

  /** Judges one suspect on the broker's state and removes it when proven given up. */
  async #judge(s: Suspect): Promise<'done' | 'wait'> {
    const stream = this.names.stream;
    try {
      // The consumer first: a message settled after this read is no longer stored below.
      const info = await this.jsm.consumers.info(stream, queueName(s.route));
      const stored = await this.jsm.streams.getMessage(stream, { seq: s.seq });
      const verdict = judgeGivenUp({
        seq: s.seq,
        storedSubject: stored?.subject,
        consumerSubject: this.names.subject(s.route),
        deliveredSeq: info.delivered.stream_seq,
        ackFloorSeq: info.ack_floor.stream_seq,
        ackPending: info.num_ack_pending,
      });
      this.#judged++;
      if (verdict.action === 'wait') return 'wait';
      if (verdict.action === 'ignore' || stored === null) return 'done';
      const decoded = decodeDispatch(stored.data, this.maxMessageBytes);
      await this.jsm.streams.deleteMessage(stream, s.seq, false);
      this.hub.emit({
        type: 'max_deliveries',
        route: s.route,
        subject: stored.subject,
        message: decoded.ok ? decoded.message : undefined,
        deliveries: s.deliveries,
      });
      return 'done';
    } catch {
      // Gone already (acked, or another process removed it), or the broker is away: a message
      // still stored is looked at again.
      return 'wait';
    }
  }
}
