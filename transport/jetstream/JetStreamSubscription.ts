import {
  type Consumer,
  type ConsumerMessages,
  JetStreamApiCodes,
  JetStreamApiError,
  type JsMsg,
} from '@nats-io/jetstream';
import type { Clock } from '../../machines/Clock.ts';
import type { Route } from '../../machines/routing.ts';
import { DeliverySlots } from '../DeliverySlots.ts';
import { decodeDispatch, previewPayload } from '../DispatchMessage.ts';
import { type NakBackoff, runDeliveryHandler } from '../runDeliveryHandler.ts';
import { SettlingDelivery } from '../SettlingDelivery.ts';
import type { DeliveryHandler, DispatchMessage, Subscription } from '../Transport.ts';
import type { TransportEventHub } from '../TransportEventHub.ts';
import { pullBackoffMs } from './pullBackoff.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

/** What a subscription needs from its transport. */
export interface SubscriptionDeps {
  readonly hub: TransportEventHub;
  readonly maxMessageBytes: number;
  readonly handlerErrorNak: NakBackoff;
  readonly confirmAcks: boolean;
  /** Resolves once the server has read everything sent so far (one round trip shared by many). */
  readonly flush: () => Promise<void>;
  /** How long one pull request waits on the server (≥ 1000 ms). */
  readonly pullExpiresMs: number;
  /** What the backoff after a failed pull waits on. */
  readonly clock: Clock;
  /** The stream's and the route's consumer's names, for saying which one is missing. */
  readonly streamName: string;
  readonly consumerName: string;
}

/** The stream or the consumer a failed pull found missing, if that is why it failed. */
function missingOf(err: unknown): 'stream' | 'consumer' | undefined {
  const root = err instanceof Error && !(err instanceof JetStreamApiError) ? err.cause : err;
  if (!(root instanceof JetStreamApiError)) return undefined;
  if (root.code === JetStreamApiCodes.StreamNotFound) return 'stream';
  if (root.code === JetStreamApiCodes.ConsumerNotFound) return 'consumer';
  return undefined;
}

/**
 * Pull requests while slots go round between more queues than slots (`DeliverySlots.contended`),
 * and the wait between two looks at an idle queue's consumer then: one pull round.
 */
const CONTENDED_PULL_MS = 1000;

class JetStreamDelivery extends SettlingDelivery {
  constructor(
    message: DispatchMessage,
    route: Route,
    private readonly msg: JsMsg,
    private readonly deps: SubscriptionDeps,
  ) {
    super(message, route, msg.info.deliveryCount);
  }
  protected async doAck(): Promise<void> {
    try {
      if (this.deps.confirmAcks) {
        await this.msg.ackAck();
      } else {
        this.msg.ack();
        await this.deps.flush();
      }
    } catch (err) {
      throw translateJetStreamError(err, 'ack', { operationId: this.message.operationId });
    }
  }
  protected doNak(delayMs: number): void {
    this.msg.nak(delayMs > 0 ? delayMs : undefined);
  }
  protected doWorking(): void {
    this.msg.working();
  }
  protected doTerm(): void {
    // Plain term(): nats-server 2.9 ignores term(reason) and redelivers.
    this.msg.term();
  }
}

/**
 * Consumes one durable pull consumer with bounded concurrency. It only ever asks the server for
 * as many messages as it has free slots (credits; a slot frees when its delivery is settled, so an
 * ack waiting for its flush does not hold back the next pull), so nothing waits in a local buffer
 * while its ack-wait runs; several pull requests may be open at once so slots refill without
 * waiting for a batch to finish. Malformed messages are terminated and reported. Pull failures
 * (broker down) are reported and retried with capped exponential backoff on the transport's clock
 * (`pullBackoffMs`), which nothing but `stop()` cuts short; a stream or consumer not created yet
 * (a worker started before the control plane) is reported once (`waiting_for_control_plane`)
 * until a pull works again. While the slots are contended (more queues than slots), an idle queue
 * holds no slot: once a pull round it asks its consumer how many messages wait or are out with a
 * worker (`#peek`), and only one that has some takes a turn at the slots, so a worker reading
 * dozens of queues with two slots picks a message up within about one round, however many queues
 * stay empty, instead of after every empty queue has held a slot for a pull's expiry. The durable consumer keeps its state across broker restarts, and
 * unacked messages come back after ack-wait.
 *
 * @example
 * ```ts
 * const sub = new JetStreamSubscription(consumer, route, 16, handler, deps);
 * sub.start(); … await sub.stop();
 * ```
 */
export class JetStreamSubscription implements Subscription {
  readonly closed: Promise<void>;
  #resolveClosed!: () => void;
  #inFlight = 0;
  /** Deliveries handed to a handler and not yet settled: what the pull credits count. */
  #held = 0;
  #requested = 0;
  #stopped = false;
  #leave: (() => void) | undefined;
  #stopping: Promise<void> | undefined;
  #failures = 0;
  /** The failure count the last backoff was for. */
  #backedOff = 0;
  /** Whether the missing stream or consumer was reported since the last pull that worked. */
  #waitingReported = false;
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  readonly #fetches = new Set<ConsumerMessages>();
  readonly #pulls = new Set<Promise<void>>();
  readonly #running = new Set<Promise<void>>();
  #loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly consumer: () => Promise<Consumer>,
    readonly route: Route,
    private readonly concurrency: number,
    private readonly handler: DeliveryHandler,
    private readonly deps: SubscriptionDeps,
    private readonly onClosed: (s: JetStreamSubscription) => void,
    private readonly slots: DeliverySlots = new DeliverySlots(concurrency),
  ) {
    this.closed = new Promise((resolve) => {
      this.#resolveClosed = resolve;
    });
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  start(): void {
    this.#leave = this.slots.join(() => this.#signal(), this);
    // Until a pull brings a message the queue is idle: it probes one message at a time, so queues
    // that stay empty do not hold slots in open pulls that a busy one sharing them needs.
    this.slots.setIdle(this, true);
    this.#loop = this.#run();
  }

  /** Ends the open pull requests (the connection dropped); the loop opens new ones. */
  abortPulls(): void {
    for (const fetch of this.#fetches) fetch.stop();
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopped = true;
      this.#stop.abort();
      this.abortPulls();
      this.#signal();
      await this.#loop;
      while (this.#pulls.size > 0) await Promise.allSettled([...this.#pulls]);
      while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
      this.#leave?.();
      this.onClosed(this);
      this.#resolveClosed();
    })();
    return this.#stopping;
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Until something changes (a slot frees, a pull ends, stop). */
  #sleep(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  async #run(): Promise<void> {
    // Refill when half of the slots are free (fewer, larger pulls), or at once when no pull is open.
    const lowWater = Math.max(1, Math.floor(this.concurrency / 2));
    while (!this.#stopped) {
      if (this.#failures > this.#backedOff) {
        // Once per failed pull, and only stop() cuts it short: slots freed by other queues must
        // not (a pull that fails at once would otherwise retry at every such wake-up).
        this.#backedOff = this.#failures;
        await this.deps.clock.sleep(pullBackoffMs(this.#failures), this.#stop.signal);
        continue;
      }
      if (this.#idleWhileContended()) {
        await this.#peek();
        continue;
      }
      const own = this.concurrency - this.#held - this.#requested;
      const free = own > 0 ? Math.min(own, this.slots.grant(this, this.#requested)) : 0;
      if (free >= lowWater || (free > 0 && this.#fetches.size === 0 && this.#requested === 0)) {
        this.#requested += free;
        this.slots.request(free);
        const pull = this.#pull(free).finally(() => {
          this.#pulls.delete(pull);
          this.#signal();
        });
        this.#pulls.add(pull);
        continue;
      }
      await this.#sleep();
    }
  }

  /** An idle queue with nothing asked for nor held, among more queues than slots. */
  #idleWhileContended(): boolean {
    return (
      this.slots.contended &&
      this.slots.isIdle(this) &&
      this.#held === 0 &&
      this.#requested === 0 &&
      this.#fetches.size === 0
    );
  }

  /**
   * Asks the consumer, without holding a slot, whether messages wait (never delivered, or out with
   * a worker and due back on a nak or an ack-wait). One that has some is marked busy and takes a
   * turn at the slots; one that has none looks again after a pull round.
   */
  async #peek(): Promise<void> {
    let waiting: number;
    try {
      const info = await (await this.consumer()).info();
      waiting = info.num_pending + info.num_ack_pending;
      this.#worked();
    } catch (err) {
      this.#failed(err);
      return;
    }
    if (this.#stopped) return;
    if (waiting > 0) {
      this.slots.setIdle(this, false);
      return;
    }
    await this.deps.clock.sleep(
      Math.min(CONTENDED_PULL_MS, this.deps.pullExpiresMs),
      this.#stop.signal,
    );
  }

  async #pull(batch: number): Promise<void> {
    let received = 0;
    let fetch: ConsumerMessages | undefined;
    try {
      fetch = await (await this.consumer()).fetch({
        max_messages: batch,
        expires: this.slots.contended
          ? Math.min(CONTENDED_PULL_MS, this.deps.pullExpiresMs)
          : this.deps.pullExpiresMs,
      });
      this.#fetches.add(fetch);
      if (this.#stopped) fetch.stop();
      for await (const msg of fetch) {
        received++;
        if (received <= batch) {
          this.#requested--;
          this.slots.cancel(1);
        }
        this.#worked();
        this.#accept(msg);
      }
      this.#worked();
      // A pull that ran to its expiry with nothing marks the queue idle (it then probes one
      // message at a time and leaves its share to busy queues); any message marks it busy.
      if (!this.#stopped) this.slots.setIdle(this, received === 0);
    } catch (err) {
      this.#failed(err);
    } finally {
      if (fetch) this.#fetches.delete(fetch);
      const unfilled = Math.max(0, batch - received);
      this.#requested -= unfilled;
      this.slots.cancel(unfilled);
    }
  }

  /** A pull or a peek failed: counted for the backoff, and reported unless stopping. */
  #failed(err: unknown): void {
    this.#failures++;
    const missing = missingOf(err);
    if (this.#stopped) {
      // Stopping: nothing to report.
    } else if (missing !== undefined) {
      if (!this.#waitingReported) {
        this.#waitingReported = true;
        this.deps.hub.emit({
          type: 'waiting_for_control_plane',
          route: this.route,
          missing,
          name: missing === 'stream' ? this.deps.streamName : this.deps.consumerName,
        });
      }
    } else {
      this.deps.hub.emit({
        type: 'consume_error',
        route: this.route,
        error: translateJetStreamError(err, 'pull', { route: this.route }),
      });
    }
  }

  /** A pull worked: the next failure starts the backoff afresh. */
  #worked(): void {
    this.#failures = 0;
    this.#backedOff = 0;
    this.#waitingReported = false;
  }

  #accept(msg: JsMsg): void {
    if (this.#stopped) {
      // Received but never started: give it back at once rather than after ack-wait.
      msg.nak();
      return;
    }
    const decoded = decodeDispatch(msg.data, this.deps.maxMessageBytes);
    if (!decoded.ok) {
      msg.term();
      this.deps.hub.emit({
        type: 'rejected',
        route: this.route,
        subject: msg.subject,
        reason: decoded.reason,
        size: msg.data.length,
        preview: previewPayload(msg.data),
      });
      this.#signal();
      return;
    }
    const delivery = new JetStreamDelivery(decoded.message, this.route, msg, this.deps);
    this.#inFlight++;
    this.#held++;
    this.slots.hold();
    delivery.onSettled = () => {
      this.#held--;
      this.slots.settled();
      this.#signal();
    };
    const run = runDeliveryHandler(
      this.handler,
      delivery,
      this.deps.hub,
      this.deps.handlerErrorNak,
    ).finally(() => {
      this.#inFlight--;
      if (delivery.onSettled) delivery.onSettled(); // never settled (cannot happen; be safe)
      this.#running.delete(run);
      this.#signal();
    });
    this.#running.add(run);
  }
}
