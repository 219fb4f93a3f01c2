import {
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { errors, type NatsConnection } from '@nats-io/transport-node';
import { type Clock, systemClock } from '../../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { Route } from '../../machines/routing.ts';
import { dispatchMsgId, encodeDispatch } from '../DispatchMessage.ts';
import type {
  ConsumeOptions,
  DeliveryHandler,
  DispatchMessage,
  Heartbeats,
  PublishResult,
  Subscription,
  Transport,
  TransportOptions,
  TransportTiming,
} from '../Transport.ts';
import { WAITING_MAX_READS } from '../Transport.ts';
import { TransportEventHub } from '../TransportEventHub.ts';
import { type TransportNames, transportNames } from '../TransportNames.ts';
import { resolveTiming } from '../TransportTiming.ts';
import { capHeartbeatValues, HEARTBEAT_BUCKET_MAX_VALUE_BYTES } from './capHeartbeatValues.ts';
import { coalescedFlush } from './coalescedFlush.ts';
import { connectJetStream } from './connectJetStream.ts';
import { ensureDispatchStream } from './ensureDispatchStream.ts';
import { JetStreamHeartbeats } from './JetStreamHeartbeats.ts';
import { JetStreamSubscription } from './JetStreamSubscription.ts';
import { type JetStreamLimits, jetStreamLimits } from './jetStreamLimits.ts';
import { MaxDeliveriesWatcher } from './MaxDeliveriesWatcher.ts';
import type { NatsCredentials } from './natsCredentials.ts';
import { observedBucket, observerRefusal } from './observedBucket.ts';
import { publishInLanes } from './publishInLanes.ts';
import { replicaRefusal, type StreamReplicas, streamReplicas } from './streamReplicas.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';
import { unsettledDispatches } from './unsettledDispatches.ts';
import { waitingDispatches } from './waitingDispatches.ts';

/** Options of the JetStream transport. */
export interface JetStreamTransportOptions extends TransportOptions {
  /** Server URL(s), e.g. `nats://127.0.0.1:4222`. Ignored when `connection` is given. */
  readonly servers?: string | string[];
  /** Credentials and TLS (see `natsConnectOptions`). Ignored when `connection` is given. */
  readonly credentials?: NatsCredentials;
  /** An open connection to use instead; the transport will not close it. */
  readonly connection?: NatsConnection;
  /** Names the deployment: stream, subjects, consumers and bucket derive from it ['opstate']. */
  readonly prefix?: string;
  /** Publishes `publishMany` keeps in flight at once [1000]. */
  readonly publishWindow?: number;
  /** Server-side cap on unacked messages per queue, across all processes [1000]. */
  readonly maxAckPending?: number;
  /**
   * Most bytes the dispatch stream stores [256 MiB]; when full, publishes are refused and the
   * dispatch relay retries them (`ensureDispatchStream`).
   */
  readonly maxStreamBytes?: number;
  /**
   * Copies of the dispatch stream, its consumers and the heartbeat bucket, 1–5 [3 on a cluster
   * that advertises three or more servers, else 1]. A count the cluster cannot hold is refused
   * (`CONFIG`) when the stream is ensured.
   */
  readonly replicas?: number;
  /** How long one pull request waits on the server, ≥ 1000 ms [5000]. */
  readonly pullExpiresMs?: number;
  /** JetStream API request timeout [5000 ms]. */
  readonly requestTimeoutMs?: number;
  /** How often the connection pings its server; two unanswered and it moves to another [10000 ms]. */
  readonly pingIntervalMs?: number;
  /** How long connecting to a server may take [20000 ms]. */
  readonly connectTimeoutMs?: number;
  /**
   * What waits between retries (a failed pull's backoff, the given-up check's next look) run on
   * [the system clock]. Heartbeat ages are judged by the server's stamps, whatever this says.
   */
  readonly clock?: Clock;
  /**
   * Run on a server that accepts clients without credentials (a development server, such as
   * `nats-server -js` with no configuration). Without it such a server is refused with `CONFIG`.
   */
  readonly insecureNats?: boolean;
  /**
   * The prefix of the connection's reply subjects [`_INBOX`]: the CLI gives each role its own
   * (`inboxPrefixOf`), so the server can let each subscribe to its own replies only.
   */
  readonly inboxPrefix?: string;
  /**
   * Observe only [false]: read the heartbeat bucket and never create or change anything (the
   * dashboard and `opstate status`, whose NATS user may do no more). The bucket is bound, not
   * created; one that does not exist is a retryable `TRANSPORT` error saying a control plane
   * creates it. `ensure`, `publish`, `publishMany`, `consume` and heartbeat writes are refused
   * with `CONFIG`.
   */
  readonly observer?: boolean;
}

/** The JetStream transport, plus the connection for tools and tests. */
export interface JetStreamTransport extends Transport {
  readonly connection: NatsConnection;
  /** The server accepts clients without credentials (allowed by `insecureNats`). */
  readonly acceptsAnonymous: boolean;
  /** Deletes the stream and the heartbeat bucket (tests, teardown). */
  destroy(): Promise<void>;
}

/** What the transport's parts share: the connection, names, limits and the open subscriptions. */
interface Parts {
  readonly options: JetStreamTransportOptions;
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly names: TransportNames;
  readonly timing: TransportTiming;
  readonly limits: JetStreamLimits;
  readonly replicas: StreamReplicas;
  readonly hub: TransportEventHub;
  readonly clock: Clock;
  readonly watcher: MaxDeliveriesWatcher;
  readonly subscriptions: Set<JetStreamSubscription>;
  readonly openBucket: () => Promise<KV>;
  readonly flush: () => Promise<void>;
}

/** The heartbeat bucket, created on first use; a failed creation is tried again next time. */
function lazyBucket(
  js: JetStreamClient,
  names: TransportNames,
  timing: TransportTiming,
  replicas: StreamReplicas,
) {
  let bucket: Promise<KV> | undefined;
  return (): Promise<KV> => {
    bucket ??= new Kvm(js)
      .create(names.heartbeatBucket, {
        history: 1,
        replicas: replicas.replicas,
        ttl: timing.heartbeatMaxAgeMs,
        maxValueSize: HEARTBEAT_BUCKET_MAX_VALUE_BYTES,
      })
      .catch((err: unknown) => {
        bucket = undefined;
        throw err;
      });
    return bucket;
  };
}

/**
 * Follows the connection's status: a disconnect aborts the subscriptions' pulls and is told as
 * `disconnected`, a reconnect as `reconnected`. `stop` ends it: a caller-owned connection outlives
 * the transport, and its status stream would otherwise keep close() waiting until the caller
 * closed the connection.
 */
function watchStatus(parts: Parts): { stop: () => void; done: Promise<void> } {
  const statuses = parts.nc.status() as AsyncIterable<{ type: string }> & { stop?: () => void };
  const done = (async () => {
    for await (const s of statuses) {
      if (s.type === 'disconnect') {
        for (const sub of parts.subscriptions) sub.abortPulls();
        parts.hub.emit({ type: 'disconnected' });
      } else if (s.type === 'reconnect') {
        parts.hub.emit({ type: 'reconnected' });
      }
    }
  })();
  return { stop: () => statuses.stop?.(), done };
}

/** An observer's heartbeats: read as any other's; every write refused before a request. */
function readOnly(heartbeats: Heartbeats, refuse: (what: string) => void): Heartbeats {
  return {
    list: () => heartbeats.list(),
    isAlive: (...args) => heartbeats.isAlive(...args),
    beat: async () => refuse('write a heartbeat'),
    claim: async () => refuse('claim a worker id'),
    remove: async () => refuse('remove a heartbeat'),
  };
}

/** The dispatches in the stream not yet settled, read from its consumers' state. */
async function readUnsettled({ jsm, names, limits }: Parts) {
  try {
    return await unsettledDispatches(jsm, names.stream, limits.maxMessageBytes);
  } catch (err) {
    throw translateJetStreamError(err, 'read unsettled dispatches', { stream: names.stream });
  }
}

/** Of `wanted`, the dispatches their queues have not handed out yet. */
async function readWaiting({ jsm, names, limits }: Parts, wanted: ReadonlyMap<string, number>) {
  try {
    return await waitingDispatches(
      jsm,
      names.stream,
      wanted,
      limits.maxMessageBytes,
      WAITING_MAX_READS,
    );
  } catch (err) {
    throw translateJetStreamError(err, 'read waiting dispatches', { stream: names.stream });
  }
}

/** The heartbeat store on the bucket; workers are listed from the bucket stream's subjects. */
function heartbeatsOf(parts: Parts): JetStreamHeartbeats {
  const { names, jsm, openBucket } = parts;
  return new JetStreamHeartbeats(
    openBucket,
    parts.timing,
    async () => {
      await openBucket();
      const prefix = `$KV.${names.heartbeatBucket}.`;
      const info = await jsm.streams.info(`KV_${names.heartbeatBucket}`, {
        subjects_filter: `${prefix}worker.>`,
      });
      return Object.keys(info.state.subjects ?? {}).map((s) => s.slice(prefix.length));
    },
    (event) => parts.hub.emit(event),
  );
}

async function publishOne(
  parts: Parts,
  route: Route,
  message: DispatchMessage,
): Promise<PublishResult> {
  const data = encodeDispatch(message, parts.limits.maxMessageBytes);
  const subject = parts.names.subject(route);
  try {
    const ack = await parts.js.publish(subject, data, {
      msgID: dispatchMsgId(message),
      expect: { streamName: parts.names.stream },
    });
    parts.hub.countPublish(ack.duplicate);
    return { duplicate: ack.duplicate };
  } catch (err) {
    throw translateJetStreamError(err, 'publish', { subject, msgId: dispatchMsgId(message) });
  }
}

/**
 * How long `ensure` repeats a management request that timed out. Every step of it is idempotent,
 * and on a busy cluster a replica change can outlast one request's timeout while the new group
 * elects its leader: the server finishes the change, and asking again reads it back.
 */
const ENSURE_TIMEOUT_RETRY_MS = 30_000;

async function ensureRoutes(parts: Parts, routes: readonly Route[]): Promise<void> {
  const { names } = parts;
  const giveUpAt = parts.clock.now() + ENSURE_TIMEOUT_RETRY_MS;
  for (let pause = 250; ; pause = Math.min(pause * 2, 2000)) {
    try {
      await ensureRoutesOnce(parts, routes);
      return;
    } catch (err) {
      if (err instanceof errors.TimeoutError && parts.clock.now() + pause < giveUpAt) {
        await parts.clock.sleep(pause);
        continue;
      }
      const refused = replicaRefusal(err, names.stream, parts.replicas.replicas);
      if (refused !== err) throw refused;
      throw translateJetStreamError(err, 'ensure', { stream: names.stream });
    }
  }
}

async function ensureRoutesOnce(parts: Parts, routes: readonly Route[]): Promise<void> {
  const { jsm, names } = parts;
  await ensureDispatchStream(jsm, names, parts.timing, routes, {
    maxAckPending: parts.limits.maxAckPending,
    maxBytes: parts.limits.maxStreamBytes,
    replicas: parts.replicas,
  });
  await parts.openBucket();
  await capHeartbeatValues(jsm, `KV_${names.heartbeatBucket}`, parts.replicas);
}

/** A subscription on the route's durable consumer, looked up on first pull. */
function consumeRoute(
  parts: Parts,
  route: Route,
  opts: ConsumeOptions,
  handler: DeliveryHandler,
): Subscription {
  if (!Number.isSafeInteger(opts.concurrency) || opts.concurrency < 1) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `consume() concurrency must be a positive integer; got ${String(opts.concurrency)}.`,
      { details: { concurrency: opts.concurrency } },
    );
  }
  const { options, names, subscriptions } = parts;
  parts.watcher.start();
  const durable = names.consumer(route);
  let handle: Promise<Consumer> | undefined;
  const getConsumer = (): Promise<Consumer> => {
    handle ??= parts.js.consumers.get(names.stream, durable).catch((err: unknown) => {
      handle = undefined;
      throw err;
    });
    return handle;
  };
  const deps = {
    hub: parts.hub,
    maxMessageBytes: parts.limits.maxMessageBytes,
    handlerErrorNak: {
      baseMs: options.handlerErrorNakDelayMs ?? 1000,
      maxMs: options.handlerErrorNakMaxDelayMs ?? 60_000,
    },
    confirmAcks: options.confirmAcks ?? false,
    pullExpiresMs: parts.limits.pullExpiresMs,
    flush: parts.flush,
    clock: parts.clock,
    streamName: names.stream,
    consumerName: durable,
  };
  const sub = new JetStreamSubscription(
    getConsumer,
    route,
    opts.concurrency,
    handler,
    deps,
    (s) => subscriptions.delete(s),
    opts.slots,
  );
  subscriptions.add(sub);
  sub.start();
  return sub;
}

/** Stops every subscription and the watcher; closes the connection only if the transport opened it. */
async function closeParts(parts: Parts, status: { stop: () => void; done: Promise<void> }) {
  const { nc } = parts;
  await Promise.all([...parts.subscriptions].map((s) => s.stop()));
  parts.watcher.stop();
  status.stop();
  if (parts.options.connection === undefined && !nc.isClosed()) {
    // The bound on the flush is cancelled once it answers: a pending 2 s timer kept every
    // process that closed its runtime alive for those 2 s before it could exit.
    const bound = new AbortController();
    await Promise.race([nc.flush(), systemClock.sleep(2000, bound.signal)])
      .catch(() => {})
      .finally(() => bound.abort());
    await nc.close();
  }
  await status.done.catch(() => {});
}

/**
 * Connects to NATS and returns the JetStream transport: a work-queue stream
 * `<prefix>_dispatch` on subjects `<prefix>.dispatch.<location type>.<operation type>`, one
 * durable pull consumer per routing queue, and the heartbeat bucket `<prefix>_heartbeats`.
 * Validates the timers first (`OpstateError` `CONFIG`). Reconnects for ever; consumers resume
 * after a broker restart, and unacked messages come back after ack-wait.
 *
 * @example
 * ```ts
 * const transport = await createJetStreamTransport({ servers: 'nats://127.0.0.1:4222',
 *   prefix: 'opstate' });
 * await transport.ensure(allRoutes());
 * await transport.publish(route, { operationId: 'op1', kind, operationType, attempt: 1 });
 * ```
 */
export async function createJetStreamTransport(
  options: JetStreamTransportOptions = {},
): Promise<JetStreamTransport> {
  const timing = resolveTiming(options.timing);
  const names = transportNames(options.prefix ?? 'opstate');
  const limits = jetStreamLimits(options);
  streamReplicas(options.replicas, undefined); // a bad count is refused before connecting
  const { nc, jsm, anonymous } = await connectJetStream({
    ...options,
    name: `opstate-${names.prefix}`,
    requestTimeoutMs: limits.requestTimeoutMs,
  });
  const js = jetstream(nc, { timeout: limits.requestTimeoutMs });
  const hub = new TransportEventHub();
  const clock = options.clock ?? systemClock;
  const replicas = streamReplicas(options.replicas, nc.info);
  const parts: Parts = {
    options,
    nc,
    js,
    jsm,
    names,
    timing,
    limits,
    replicas,
    hub,
    clock,
    watcher: new MaxDeliveriesWatcher(nc, jsm, names, hub, limits.maxMessageBytes, { clock }),
    subscriptions: new Set<JetStreamSubscription>(),
    openBucket:
      options.observer === true
        ? observedBucket(js, jsm, names)
        : lazyBucket(js, names, timing, replicas),
    flush: coalescedFlush(() => nc.flush()),
  };
  const status = watchStatus(parts);
  let closing: Promise<void> | undefined;
  const assertOpen = (): void => {
    if (closing) {
      throw new OpstateError(
        OpstateErrorCode.TRANSPORT,
        'The transport is closed; create a new one.',
      );
    }
  };
  /** An observer's transport changes nothing on the server: refused before any request. */
  const assertWriter = (what: string): void => {
    if (options.observer === true) throw observerRefusal(what);
  };
  const publish = (route: Route, message: DispatchMessage) => {
    assertOpen();
    assertWriter('publish a dispatch');
    return publishOne(parts, route, message);
  };
  const heartbeats = heartbeatsOf(parts);

  const transport: JetStreamTransport = {
    timing,
    connection: nc,
    acceptsAnonymous: anonymous,
    heartbeats: options.observer === true ? readOnly(heartbeats, assertWriter) : heartbeats,
    get openSubscriptions() {
      return parts.subscriptions.size;
    },
    async ensure(routes) {
      assertOpen();
      assertWriter('create or update the dispatch stream, its consumers or the heartbeat bucket');
      await ensureRoutes(parts, routes);
    },
    publish,
    publishMany: (items) => publishInLanes(items, limits.publishWindow, publish),
    consume(route, opts, handler) {
      assertOpen();
      assertWriter('consume dispatches');
      return consumeRoute(parts, route, opts, handler);
    },
    unsettled: () => readUnsettled(parts),
    waiting: (wanted) => readWaiting(parts, wanted),
    onEvent: (listener) => hub.on(listener),
    stats: () => hub.stats(),
    close() {
      closing ??= closeParts(parts, status);
      return closing;
    },
    async destroy() {
      assertWriter('delete the dispatch stream or the heartbeat bucket');
      try {
        await jsm.streams.delete(names.stream).catch(() => false);
        await jsm.streams.delete(`KV_${names.heartbeatBucket}`).catch(() => false);
      } finally {
        await transport.close();
      }
    },
  };
  return transport;
}
