import type { Clock } from '../../machines/Clock.ts';
import { queueName, type Route } from '../../machines/routing.ts';
import type { DeliverySlots } from '../DeliverySlots.ts';
import { decodeDispatch, previewPayload } from '../DispatchMessage.ts';
import { type NakBackoff, runDeliveryHandler } from '../runDeliveryHandler.ts';
import { SettlingDelivery } from '../SettlingDelivery.ts';
import type { DeliveryHandler, DispatchMessage, TransportTiming } from '../Transport.ts';
import type { TransportEventHub } from '../TransportEventHub.ts';
import { Deque } from './Deque.ts';

/** What a queue needs from its transport. */
export interface QueueDeps {
  readonly clock: Clock;
  readonly timing: TransportTiming;
  readonly hub: TransportEventHub;
  readonly maxMessageBytes: number;
  readonly handlerErrorNak: NakBackoff;
}

interface StoredMessage {
  readonly seq: number;
  readonly data: Uint8Array;
  deliveries: number;
  /** Bumped on every delivery: nak/working from an older delivery are ignored. */
  token: number;
  state: 'ready' | 'held' | 'delayed';
  timer: unknown;
}

/** One consumer of a queue (a `Subscription` in the in-process transport). */
export interface QueueConsumer {
  readonly concurrency: number;
  /** The bound it shares with other subscriptions (a worker's queues). */
  readonly slots: DeliverySlots;
  readonly handler: DeliveryHandler;
  inFlight: number;
  stopped: boolean;
  readonly running: Set<Promise<void>>;
}

class InProcessDelivery extends SettlingDelivery {
  constructor(
    message: DispatchMessage,
    route: Route,
    private readonly queue: InProcessQueue,
    private readonly stored: StoredMessage,
    private readonly token: number,
  ) {
    super(message, route, stored.deliveries);
  }
  protected doAck(): Promise<void> {
    this.queue.remove(this.stored);
    return Promise.resolve();
  }
  protected doNak(delayMs: number): void {
    this.queue.nak(this.stored, this.token, delayMs);
  }
  protected doWorking(): void {
    this.queue.working(this.stored, this.token);
  }
  protected doTerm(): void {
    this.queue.remove(this.stored);
  }
}

/**
 * One routing queue in memory, with JetStream's work-queue semantics: a message is held by one
 * consumer at a time, redelivered after ack-wait unless `working()` extends it, delayed by
 * `nak(ms)`, removed by ack or term, and given up (removed, `max_deliveries` event) when a
 * delivery that was the `maxDeliver`-th runs out of time or is nak()ed. Redeliveries go before
 * fresh messages.
 *
 * @example
 * ```ts
 * const q = new InProcessQueue(route, deps);
 * q.attach(consumer); q.enqueue(bytes);
 * ```
 */
export class InProcessQueue {
  readonly #messages = new Map<number, StoredMessage>();
  readonly #fresh = new Deque<StoredMessage>();
  readonly #redeliver = new Deque<StoredMessage>();
  readonly #consumers: QueueConsumer[] = [];
  #nextSeq = 1;
  #cursor = 0;
  #pumping = false;

  constructor(
    readonly route: Route,
    private readonly deps: QueueDeps,
  ) {}

  /** Messages stored (ready, held or delayed). */
  get size(): number {
    return this.#messages.size;
  }

  /** Messages delivered at least once and not settled since (held, delayed or awaiting redelivery). */
  unsettled(): DispatchMessage[] {
    const out: DispatchMessage[] = [];
    for (const stored of this.#messages.values()) {
      if (stored.deliveries === 0) continue;
      const decoded = decodeDispatch(stored.data, this.deps.maxMessageBytes);
      if (decoded.ok) out.push(decoded.message);
    }
    return out;
  }

  /** Of `wanted` (operation id → attempt), the messages stored and never delivered. */
  waiting(wanted: ReadonlyMap<string, number>): DispatchMessage[] {
    const out: DispatchMessage[] = [];
    for (const stored of this.#messages.values()) {
      if (stored.deliveries !== 0) continue;
      const decoded = decodeDispatch(stored.data, this.deps.maxMessageBytes);
      if (!decoded.ok) continue;
      if (wanted.get(decoded.message.operationId) === decoded.message.attempt) {
        out.push(decoded.message);
      }
    }
    return out;
  }

  enqueue(data: Uint8Array): void {
    const stored: StoredMessage = {
      seq: this.#nextSeq++,
      data,
      deliveries: 0,
      token: 0,
      state: 'ready',
      timer: undefined,
    };
    this.#messages.set(stored.seq, stored);
    this.#fresh.push(stored);
    this.pump();
  }

  attach(consumer: QueueConsumer): void {
    this.#consumers.push(consumer);
    this.pump();
  }

  detach(consumer: QueueConsumer): void {
    const i = this.#consumers.indexOf(consumer);
    if (i >= 0) this.#consumers.splice(i, 1);
  }

  remove(stored: StoredMessage): void {
    if (this.#messages.get(stored.seq) !== stored) return;
    this.#messages.delete(stored.seq);
    this.deps.clock.clearTimeout(stored.timer);
    stored.timer = undefined;
  }

  nak(stored: StoredMessage, token: number, delayMs: number): void {
    if (!this.#isHeldBy(stored, token)) return;
    this.deps.clock.clearTimeout(stored.timer);
    if (this.#exhausted(stored)) return;
    if (delayMs > 0) {
      stored.state = 'delayed';
      stored.timer = this.deps.clock.setTimeout(() => this.#makeReady(stored), delayMs);
    } else {
      this.#makeReady(stored);
    }
  }

  working(stored: StoredMessage, token: number): void {
    if (!this.#isHeldBy(stored, token)) return;
    this.#startAckWait(stored, token);
  }

  /** Hands ready messages to consumers with a free slot, round robin. */
  pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      for (;;) {
        const free = this.#freeConsumer();
        if (!free) return;
        const stored = this.#nextReady();
        if (!stored) return;
        // The turn passes only when a message is actually handed over, so an idle pump (no
        // message waiting) never skips a consumer's turn.
        this.#cursor = (free.index + 1) % this.#consumers.length;
        this.#deliver(stored, free.consumer);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Clears every timer (the transport is closing). */
  dispose(): void {
    for (const stored of this.#messages.values()) this.deps.clock.clearTimeout(stored.timer);
  }

  #isHeldBy(stored: StoredMessage, token: number): boolean {
    return (
      this.#messages.get(stored.seq) === stored && stored.state === 'held' && stored.token === token
    );
  }

  #freeConsumer(): { consumer: QueueConsumer; index: number } | undefined {
    const n = this.#consumers.length;
    for (let i = 0; i < n; i++) {
      const index = (this.#cursor + i) % n;
      const consumer = this.#consumers[index];
      if (
        consumer &&
        !consumer.stopped &&
        consumer.inFlight < consumer.concurrency &&
        consumer.slots.free > 0
      ) {
        return { consumer, index };
      }
    }
    return undefined;
  }

  #nextReady(): StoredMessage | undefined {
    for (;;) {
      const stored = this.#redeliver.shift() ?? this.#fresh.shift();
      if (!stored) return undefined;
      // Skip entries removed or re-queued since they were pushed.
      if (this.#messages.get(stored.seq) === stored && stored.state === 'ready') return stored;
    }
  }

  #deliver(stored: StoredMessage, consumer: QueueConsumer): void {
    const decoded = decodeDispatch(stored.data, this.deps.maxMessageBytes);
    if (!decoded.ok) {
      this.remove(stored);
      this.deps.hub.emit({
        type: 'rejected',
        route: this.route,
        subject: queueName(this.route),
        reason: decoded.reason,
        size: stored.data.length,
        preview: previewPayload(stored.data),
      });
      return;
    }
    stored.deliveries++;
    stored.token++;
    stored.state = 'held';
    this.#startAckWait(stored, stored.token);
    const delivery = new InProcessDelivery(decoded.message, this.route, this, stored, stored.token);
    consumer.inFlight++;
    consumer.slots.hold();
    const run = runDeliveryHandler(
      consumer.handler,
      delivery,
      this.deps.hub,
      this.deps.handlerErrorNak,
    ).finally(() => {
      consumer.inFlight--;
      consumer.running.delete(run);
      consumer.slots.settled(); // wakes every queue sharing the slots, this one included
    });
    consumer.running.add(run);
  }

  #startAckWait(stored: StoredMessage, token: number): void {
    this.deps.clock.clearTimeout(stored.timer);
    stored.timer = this.deps.clock.setTimeout(() => {
      if (!this.#isHeldBy(stored, token)) return;
      if (this.#exhausted(stored)) return;
      this.#makeReady(stored);
    }, this.deps.timing.ackWaitMs);
  }

  /** At `maxDeliver` deliveries the message is removed and reported instead of redelivered. */
  #exhausted(stored: StoredMessage): boolean {
    if (stored.deliveries < this.deps.timing.maxDeliver) return false;
    this.remove(stored);
    const decoded = decodeDispatch(stored.data, this.deps.maxMessageBytes);
    this.deps.hub.emit({
      type: 'max_deliveries',
      route: this.route,
      subject: queueName(this.route),
      message: decoded.ok ? decoded.message : undefined,
      deliveries: stored.deliveries,
    });
    return true;
  }

  #makeReady(stored: StoredMessage): void {
    if (this.#messages.get(stored.seq) !== stored) return;
    stored.timer = undefined;
    stored.state = 'ready';
    this.#redeliver.push(stored);
    this.pump();
  }
}
