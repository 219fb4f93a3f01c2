import { type Clock, systemClock } from '../../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { queueName, type Route } from '../../machines/routing.ts';
import { DeliverySlots } from '../DeliverySlots.ts';
import { DEFAULT_MAX_MESSAGE_BYTES, dispatchMsgId, encodeDispatch } from '../DispatchMessage.ts';
import type {
  ConsumeOptions,
  DeliveryHandler,
  DispatchMessage,
  PublishItem,
  PublishManyResult,
  PublishResult,
  Subscription,
  Transport,
  TransportOptions,
  TransportTiming,
} from '../Transport.ts';
import { TransportEventHub } from '../TransportEventHub.ts';
import { resolveTiming } from '../TransportTiming.ts';
import { InProcessHeartbeats } from './InProcessHeartbeats.ts';
import { InProcessQueue, type QueueConsumer, type QueueDeps } from './InProcessQueue.ts';

/** Options of the in-process transport. */
export interface InProcessTransportOptions extends TransportOptions {
  /** Injected time; real timers by default. */
  readonly clock?: Clock;
}

/** The in-process transport, plus a test hook that enqueues raw bytes past the publish checks. */
export interface InProcessTransport extends Transport {
  /** Enqueues bytes as they are, to exercise receive-side validation. Not for production code. */
  publishRaw(route: Route, data: Uint8Array): void;
}

function checkConcurrency(concurrency: number): void {
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `consume() concurrency must be a positive integer; got ${String(concurrency)}.`,
      { details: { concurrency } },
    );
  }
}

/**
 * Whether `id` is new within the dedup window, remembering it if so. `dedup` holds ids in publish
 * order with their expiry, so the expired are pruned from the front.
 */
function firstSeen(dedup: Map<string, number>, id: string, now: number, windowMs: number): boolean {
  for (const [seen, expiresAt] of dedup) {
    if (expiresAt > now) break;
    dedup.delete(seen);
  }
  if (dedup.has(id)) return false;
  dedup.set(id, now + windowMs);
  return true;
}

/**
 * A consumer of `queue` in the shared delivery slots, listed in `subscriptions` until it stops;
 * stopping detaches it, leaves the slots and waits for the deliveries it is running.
 */
function subscribe(
  queue: InProcessQueue,
  route: Route,
  opts: ConsumeOptions,
  handler: DeliveryHandler,
  subscriptions: Set<Subscription>,
): Subscription {
  const consumer: QueueConsumer = {
    concurrency: opts.concurrency,
    slots: opts.slots ?? new DeliverySlots(opts.concurrency),
    handler,
    inFlight: 0,
    stopped: false,
    running: new Set(),
  };
  let resolveClosed!: () => void;
  const closedPromise = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });
  let stopping: Promise<void> | undefined;
  const subscription: Subscription = {
    route,
    get inFlight() {
      return consumer.inFlight;
    },
    closed: closedPromise,
    stop() {
      stopping ??= (async () => {
        consumer.stopped = true;
        queue.detach(consumer);
        leave();
        while (consumer.running.size > 0) await Promise.allSettled([...consumer.running]);
        subscriptions.delete(subscription);
        resolveClosed();
      })();
      return stopping;
    },
  };
  subscriptions.add(subscription);
  const leave = consumer.slots.join(() => queue.pump());
  queue.attach(consumer);
  return subscription;
}

/** Every queue's dispatches still waiting for their first delivery among `wanted`. */
function waitingIn(
  queues: ReadonlyMap<string, InProcessQueue>,
  wanted: Parameters<InProcessTransport['waiting']>[0],
) {
  return {
    found: [...queues.entries()].flatMap(([queue, q]) =>
      q.waiting(wanted).map((message) => ({ message, queue })),
    ),
    complete: true,
  };
}

/** What every queue of one transport shares. */
function queueDeps(
  options: InProcessTransportOptions,
  clock: Clock,
  timing: TransportTiming,
  hub: TransportEventHub,
): QueueDeps {
  return {
    clock,
    timing,
    hub,
    maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    handlerErrorNak: {
      baseMs: options.handlerErrorNakDelayMs ?? 1000,
      maxMs: options.handlerErrorNakMaxDelayMs ?? 60_000,
    },
  };
}

/**
 * The transport for one process (the embedded default and fast tests): the same contract and
 * semantics as JetStream — ack-wait redelivery, `working()`, `nak(delay)`, a dedup window, max
 * deliveries, one consumer group per queue — with messages in memory (lost when the process
 * exits; the dispatch relay and the reconciler re-dispatch from the database).
 *
 * @example
 * ```ts
 * const transport = createInProcessTransport({ timing: { heartbeatIntervalMs: 100,
 *   heartbeatTimeoutMs: 400, reconcilerFloorMs: 800, ackWaitMs: 1000 } });
 * const sub = transport.consume(route, { concurrency: 4 }, async (d) => { await d.ack(); });
 * await transport.publish(route, { operationId: 'op1', kind, operationType, attempt: 1 });
 * await sub.stop(); await transport.close();
 * ```
 */
export function createInProcessTransport(
  options: InProcessTransportOptions = {},
): InProcessTransport {
  const timing = resolveTiming(options.timing);
  const clock = options.clock ?? systemClock;
  const hub = new TransportEventHub();
  const deps = queueDeps(options, clock, timing, hub);
  const { maxMessageBytes } = deps;
  const queues = new Map<string, InProcessQueue>();
  /** Dedup ids in publish order with their expiry, so the oldest are pruned from the front. */
  const dedup = new Map<string, number>();
  const subscriptions = new Set<Subscription>();
  let closed = false;

  const assertOpen = (): void => {
    if (closed) {
      throw new OpstateError(
        OpstateErrorCode.TRANSPORT,
        'The transport is closed; create a new one.',
      );
    }
  };
  const queueOf = (route: Route): InProcessQueue => {
    const name = queueName(route);
    let queue = queues.get(name);
    if (!queue) {
      queue = new InProcessQueue(route, deps);
      queues.set(name, queue);
    }
    return queue;
  };
  const publishNow = (route: Route, message: DispatchMessage): PublishResult => {
    assertOpen();
    const data = encodeDispatch(message, maxMessageBytes);
    const duplicate = !firstSeen(
      dedup,
      dispatchMsgId(message),
      clock.now(),
      timing.duplicateWindowMs,
    );
    if (!duplicate) queueOf(route).enqueue(data);
    hub.countPublish(duplicate);
    return { duplicate };
  };

  const transport: InProcessTransport = {
    timing,
    heartbeats: new InProcessHeartbeats(clock, timing),
    get openSubscriptions() {
      return subscriptions.size;
    },
    ensure(routes) {
      assertOpen();
      for (const route of routes) queueOf(route);
      return Promise.resolve();
    },
    // A refused publish is a rejected promise, never a throw.
    publish: async (route, message) => publishNow(route, message),
    publishMany(items: readonly PublishItem[]) {
      return Promise.resolve(
        items.map((item): PublishManyResult => {
          try {
            return { ok: true, duplicate: publishNow(item.route, item.message).duplicate };
          } catch (err) {
            return { ok: false, error: err instanceof Error ? err : new Error(String(err)) };
          }
        }),
      );
    },
    publishRaw(route, data) {
      assertOpen();
      queueOf(route).enqueue(data);
    },
    consume(route: Route, opts: ConsumeOptions, handler: DeliveryHandler): Subscription {
      assertOpen();
      checkConcurrency(opts.concurrency);
      return subscribe(queueOf(route), route, opts, handler, subscriptions);
    },
    unsettled: () => Promise.resolve([...queues.values()].flatMap((q) => q.unsettled())),
    waiting: (wanted) => Promise.resolve(waitingIn(queues, wanted)),
    onEvent: (listener) => hub.on(listener),
    stats: () => hub.stats(),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...subscriptions].map((s) => s.stop()));
      for (const queue of queues.values()) queue.dispose();
    },
  };
  return transport;
}
