import {
  createInbox,
  type Msg,
  type NatsConnection,
  type Subscription as NatsSubscription,
  nanos,
} from '@nats-io/transport-node';
import type { Route } from '../../machines/routing.ts';
import { DeliverySlots } from '../DeliverySlots.ts';
import { decodeDispatch, previewPayload } from '../DispatchMessage.ts';
import { runDeliveryHandler } from '../runDeliveryHandler.ts';
import { SettlingDelivery } from '../SettlingDelivery.ts';
import type { DeliveryHandler, DispatchMessage, Subscription } from '../Transport.ts';
import type { TransportEventHub } from '../TransportEventHub.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

/** What a subscription needs from its transport. */
export interface SubscriptionDeps {
  readonly nc: NatsConnection;
  readonly hub: TransportEventHub;
  readonly maxMessageBytes: number;
  readonly handlerErrorNakDelayMs: number;
  readonly confirmAcks: boolean;
  /** JetStream API request timeout, for confirmed acks. */
  readonly requestTimeoutMs: number;
  /** Resolves once the server has read everything sent so far (one round trip shared by many). */
  readonly flush: () => Promise<void>;
  /** How long one pull request waits on the server (≥ 1000 ms). */
  readonly pullExpiresMs: number;
}

/** Pull requests while slots go round between more queues than slots (`DeliverySlots.contended`). */
const CONTENDED_PULL_MS = 1000;
/** A pull request whose end the server never reported (a lost status) is given up this much later. */
const PULL_GRACE_MS = 5000;

/** The delivery count from a JetStream ack subject (`$JS.ACK.<stream>.<consumer>.<delivered>.…`). */
function deliveryCountOf(reply: string): number {
  const t = reply.split('.');
  // v1: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending> (9 tokens);
  // v2 adds <domain>.<account hash> after ACK (and a token at the end).
  const n = Number(t.length === 9 ? t[4] : t[6]);
  return Number.isSafeInteger(n) && n > 0 ? n : 1;
}

class JetStreamDelivery extends SettlingDelivery {
  constructor(
    message: DispatchMessage,
    route: Route,
    private readonly msg: Msg,
    private readonly deps: SubscriptionDeps,
  ) {
    super(message, route, deliveryCountOf(msg.reply ?? ''));
  }
  protected async doAck(): Promise<void> {
    try {
      if (this.deps.confirmAcks) {
        await this.deps.nc.request(this.msg.reply ?? '', '+ACK', {
          timeout: this.deps.requestTimeoutMs,
        });
      } else {
        this.msg.respond('+ACK');
        await this.deps.flush();
      }
    } catch (err) {
      throw translateJetStreamError(err, 'ack', { operationId: this.message.operationId });
    }
  }
  protected doNak(delayMs: number): void {
    this.msg.respond(delayMs > 0 ? `-NAK ${JSON.stringify({ delay: nanos(delayMs) })}` : '-NAK');
  }
  protected doWorking(): void {
    this.msg.respond('+WPI');
  }
  protected doTerm(): void {
    // Plain +TERM: nats-server 2.9 ignores a term reason and redelivers.
    this.msg.respond('+TERM');
  }
}

/** One pull request sent and not yet ended. */
interface OpenPull {
  remaining: number;
  readonly timer: NodeJS.Timeout;
}

/**
 * Consumes one durable pull consumer with bounded concurrency. It asks the server for messages
 * with pull requests of its own on ONE inbox subscription that lives as long as the subscription:
 * a message the server delivers is never dropped by the client (a client-side fetch that ends
 * early — a missed idle heartbeat on a starved or frozen process, a stop — would drop what
 * arrives after it and leave it pending until ack-wait). It only asks for as many messages as its
 * slots allow (`DeliverySlots`: a slot frees when its delivery is settled), so nothing waits in a
 * local buffer while its ack-wait runs. Malformed messages are terminated and reported. Pull
 * failures (broker down, consumer missing) are reported and retried with backoff; the durable
 * consumer keeps its state across broker restarts, and unacked messages come back after ack-wait.
 *
 * @example
 * ```ts
 * const sub = new JetStreamSubscription(nextSubject, route, 16, handler, deps, onClosed, slots);
 * sub.start(); … await sub.stop();
 * ```
 */
export class JetStreamSubscription implements Subscription {
  readonly closed: Promise<void>;
  #resolveClosed!: () => void;
  #inFlight = 0;
  /** Deliveries handed to a handler and not yet settled. */
  #held = 0;
  /** Messages asked for in open pull requests and not yet received. */
  #requested = 0;
  #stopped = false;
  #leave: (() => void) | undefined;
  #stopping: Promise<void> | undefined;
  #failures = 0;
  #wake: (() => void) | undefined;
  #sub: NatsSubscription | undefined;
  readonly #inbox = createInbox();
  #nextPull = 0;
  /** Open pull requests in the order sent (the server serves them in that order). */
  readonly #pulls = new Map<number, OpenPull>();
  readonly #running = new Set<Promise<void>>();
  #loop: Promise<void> = Promise.resolve();

  constructor(
    /** `$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>` */
    private readonly nextSubject: string,
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
    this.#sub = this.deps.nc.subscribe(`${this.#inbox}.*`, {
      callback: (err, msg) => {
        if (err) {
          this.#failed(err);
          return;
        }
        this.#receive(msg);
      },
    });
    this.#leave = this.slots.join(() => this.#signal());
    this.#loop = this.#run();
  }

  /** The connection dropped: the server forgot the open pull requests; the loop sends new ones. */
  abortPulls(): void {
    for (const id of [...this.#pulls.keys()]) this.#endPull(id);
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopped = true;
      this.#signal();
      await this.#loop;
      // Open pull requests end on the server within their expiry; what they still deliver is
      // handed back at once (nak), never left pending until ack-wait.
      while (this.#pulls.size > 0 && !this.deps.nc.isClosed()) await this.#sleep();
      this.abortPulls();
      this.#sub?.unsubscribe();
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

  #sleep(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(() => this.#signal(), ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async #run(): Promise<void> {
    // Refill when half of the slots are free (fewer, larger pulls), or at once when none is open.
    const lowWater = Math.max(1, Math.floor(this.concurrency / 2));
    while (!this.#stopped) {
      if (this.#failures > 0) {
        await this.#sleep(Math.min(250 * 2 ** (this.#failures - 1), 5000));
        if (this.#stopped) break;
      }
      const own = this.concurrency - this.#held - this.#requested;
      const free = own > 0 ? Math.min(own, this.slots.grant(this, this.#requested)) : 0;
      if (free >= lowWater || (free > 0 && this.#pulls.size === 0)) {
        this.#pull(free);
        continue;
      }
      await this.#sleep();
    }
  }

  #pull(batch: number): void {
    const expires = this.slots.contended
      ? Math.min(CONTENDED_PULL_MS, this.deps.pullExpiresMs)
      : this.deps.pullExpiresMs;
    const id = ++this.#nextPull;
    this.#requested += batch;
    this.slots.request(batch);
    const timer = setTimeout(() => this.#endPull(id), expires + PULL_GRACE_MS);
    this.#pulls.set(id, { remaining: batch, timer });
    try {
      this.deps.nc.publish(this.nextSubject, JSON.stringify({ batch, expires: nanos(expires) }), {
        reply: `${this.#inbox}.${id}`,
      });
    } catch (err) {
      this.#endPull(id);
      this.#failed(err);
    }
  }

  /** A pull request ended (expired, filled, refused, lost): its unfilled slots are free again. */
  #endPull(id: number): void {
    const pull = this.#pulls.get(id);
    if (pull === undefined) return;
    clearTimeout(pull.timer);
    this.#pulls.delete(id);
    this.#requested -= pull.remaining;
    this.slots.cancel(pull.remaining);
    this.#signal();
  }

  #failed(err: unknown): void {
    this.#failures++;
    if (!this.#stopped) {
      this.deps.hub.emit({
        type: 'consume_error',
        route: this.route,
        error: translateJetStreamError(err, 'pull', { route: this.route }),
      });
    }
    this.#signal();
  }

  #receive(msg: Msg): void {
    const code = msg.headers?.code ?? 0;
    if (code !== 0 || !msg.reply) {
      // A status for one pull request (on `<inbox>.<id>`): 404/408 it ended, 409 the server
      // ended it, 503 no consumer or no JetStream, 100 an idle heartbeat.
      if (code === 100) return;
      this.#endPull(Number(msg.subject.slice(this.#inbox.length + 1)));
      const status = `${code} ${msg.headers?.description ?? ''}`.trim();
      // 404/408: the request ended empty-handed or expired; 409 the server ended it (max waiting,
      // a leader change): routine. No consumer (503, or 409 consumer deleted) or a bad request: a
      // failure to report and back off from.
      if (code === 503 || code === 400 || (code === 409 && /deleted/i.test(status))) {
        this.#failed(new Error(`pull refused: ${status}`));
        return;
      }
      if (code !== 409) this.#failures = 0;
      return;
    }
    // A message: it fills the oldest open pull request that still expects one.
    for (const [id, pull] of this.#pulls) {
      if (pull.remaining === 0) continue;
      pull.remaining--;
      this.#requested--;
      this.slots.cancel(1);
      if (pull.remaining === 0) this.#endPull(id);
      break;
    }
    this.#failures = 0;
    this.#accept(msg);
  }

  #accept(msg: Msg): void {
    if (this.#stopped) {
      // Received but never started: give it back at once rather than after ack-wait.
      msg.respond('-NAK');
      return;
    }
    const decoded = decodeDispatch(msg.data, this.deps.maxMessageBytes);
    if (!decoded.ok) {
      msg.respond('+TERM');
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
      this.deps.handlerErrorNakDelayMs,
    ).finally(() => {
      this.#inFlight--;
      if (delivery.onSettled) delivery.onSettled(); // never settled (cannot happen; be safe)
      this.#running.delete(run);
      this.#signal();
    });
    this.#running.add(run);
  }
}
