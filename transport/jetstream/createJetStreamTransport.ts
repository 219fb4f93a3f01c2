import {
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import { type Clock, systemClock } from '../../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { Route } from '../../machines/routing.ts';
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
} from '../Transport.ts';
import { TransportEventHub } from '../TransportEventHub.ts';
import { transportNames } from '../TransportNames.ts';
import { resolveTiming } from '../TransportTiming.ts';
import { capHeartbeatValues, HEARTBEAT_BUCKET_MAX_VALUE_BYTES } from './capHeartbeatValues.ts';
import {
  DEFAULT_DISPATCH_MAX_BYTES,
  DISPATCH_MAX_MSG_BYTES,
  ensureDispatchStream,
} from './ensureDispatchStream.ts';
import { JetStreamHeartbeats } from './JetStreamHeartbeats.ts';
import { JetStreamSubscription } from './JetStreamSubscription.ts';
import { MaxDeliveriesWatcher } from './MaxDeliveriesWatcher.ts';
import {
  type NatsCredentials,
  natsConnectOptions,
  redactServers,
  splitServers,
} from './natsCredentials.ts';
import { settleRequestsCheaply } from './settleRequestsCheaply.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';
import { unsettledDispatches } from './unsettledDispatches.ts';

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
   * outbox relay retries them (`ensureDispatchStream`).
   */
  readonly maxStreamBytes?: number;
  /** How long one pull request waits on the server, ≥ 1000 ms [5000]. */
  readonly pullExpiresMs?: number;
  /** JetStream API request timeout [5000 ms]. */
  readonly requestTimeoutMs?: number;
  /** How long connecting to a server may take [20000 ms]. */
  readonly connectTimeoutMs?: number;
  /**
   * What waits between retries (a failed pull's backoff, the given-up check's next look) run on
   * [the system clock]. Heartbeat ages are judged by the server's stamps, whatever this says.
   */
  readonly clock?: Clock;
}

/** The JetStream transport, plus the connection for tools and tests. */
export interface JetStreamTransport extends Transport {
  readonly connection: NatsConnection;
  /** Deletes the stream and the heartbeat bucket (tests, teardown). */
  destroy(): Promise<void>;
}

/**
 * A server that demands a client certificate (`verify`) answers a TLS client without one by
 * letting the connection time out: when a connect timed out with TLS on and no certificate given,
 * say so.
 */
function withClientCertificateHint(
  err: OpstateError,
  credentials: NatsCredentials | undefined,
): OpstateError {
  if (!err.retryable || credentials?.tls === undefined || credentials.tls.certFile !== undefined) {
    return err;
  }
  return new OpstateError(
    OpstateErrorCode.TRANSPORT,
    `${err.message} If the server requires a client certificate (verify), set OPSTATE_NATS_CERT_FILE and OPSTATE_NATS_KEY_FILE (natsCredentials.tls.certFile and keyFile when embedding).`,
    { details: err.details, retryable: true, cause: err },
  );
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
  const pullExpiresMs = options.pullExpiresMs ?? 5000;
  if (!(pullExpiresMs >= 1000)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `pullExpiresMs must be ≥ 1000; got ${pullExpiresMs}.`,
    );
  }
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (
    !(
      Number.isSafeInteger(maxMessageBytes) &&
      maxMessageBytes > 0 &&
      maxMessageBytes <= DISPATCH_MAX_MSG_BYTES
    )
  ) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `maxMessageBytes must be a whole number from 1 to ${DISPATCH_MAX_MSG_BYTES} (the dispatch stream's max_msg_size); got ${maxMessageBytes}.`,
    );
  }
  const maxStreamBytes = options.maxStreamBytes ?? DEFAULT_DISPATCH_MAX_BYTES;
  if (!(Number.isSafeInteger(maxStreamBytes) && maxStreamBytes >= 1024 * 1024)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `maxStreamBytes must be a whole number of bytes, at least 1 MiB (1048576); got ${maxStreamBytes}.`,
    );
  }
  const publishWindow = Math.max(1, options.publishWindow ?? 1000);
  const maxAckPending = options.maxAckPending ?? 1000;
  const ownConnection = options.connection === undefined;
  const servers = splitServers(options.servers ?? 'nats://127.0.0.1:4222');
  // Each request that succeeds no longer builds a discarded error (see settleRequestsCheaply).
  settleRequestsCheaply();
  let nc: NatsConnection;
  try {
    nc =
      options.connection ??
      (await connect({
        ...natsConnectOptions(options.credentials, servers),
        servers,
        name: `opstate-${names.prefix}`,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        // Otherwise every request (each publish, each heartbeat) builds two Errors with stack
        // traces up front, in case it fails: a large share of a busy process's time. Failures are
        // translated into OpstateErrors naming the operation and subject anyway.
        noAsyncTraces: true,
        ...(options.connectTimeoutMs === undefined ? {} : { timeout: options.connectTimeoutMs }),
      }));
  } catch (err) {
    const translated = translateJetStreamError(err, 'connect', {
      servers: redactServers(options.servers),
    });
    throw err instanceof errors.TimeoutError
      ? withClientCertificateHint(translated, options.credentials)
      : translated;
  }
  const requestTimeout = options.requestTimeoutMs ?? 5000;
  const js: JetStreamClient = jetstream(nc, { timeout: requestTimeout });
  let jsm: JetStreamManager;
  try {
    jsm = await jetstreamManager(nc, { timeout: requestTimeout });
  } catch (err) {
    if (ownConnection) await nc.close();
    throw translateJetStreamError(err, 'connect', { servers: redactServers(options.servers) });
  }
  const hub = new TransportEventHub();
  const subscriptions = new Set<JetStreamSubscription>();
  const clock = options.clock ?? systemClock;
  const watcher = new MaxDeliveriesWatcher(nc, jsm, names, hub, maxMessageBytes, { clock });
  let bucket: Promise<KV> | undefined;
  const openBucket = (): Promise<KV> => {
    bucket ??= new Kvm(js)
      .create(names.heartbeatBucket, {
        history: 1,
        ttl: timing.heartbeatMaxAgeMs,
        maxValueSize: HEARTBEAT_BUCKET_MAX_VALUE_BYTES,
      })
      .catch((err: unknown) => {
        bucket = undefined;
        throw err;
      });
    return bucket;
  };
  let closing: Promise<void> | undefined;
  // Acks sent while a flush is in flight share the next one: one round trip for many acks.
  let flushing: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  const flush = (): Promise<void> => {
    if (!flushing) {
      flushing = nc.flush().finally(() => {
        flushing = undefined;
      });
      return flushing;
    }
    queued ??= flushing
      .catch(() => {})
      .then(() => {
        queued = undefined;
        return flush();
      });
    return queued;
  };

  // Stopped on close: a caller-owned connection outlives the transport, and its status stream
  // would otherwise keep close() waiting until the caller closed the connection.
  const statuses = nc.status() as AsyncIterable<{ type: string }> & { stop?: () => void };
  const statusLoop = (async () => {
    for await (const s of statuses) {
      if (s.type === 'disconnect') {
        for (const sub of subscriptions) sub.abortPulls();
        hub.emit({ type: 'disconnected' });
      } else if (s.type === 'reconnect') {
        hub.emit({ type: 'reconnected' });
      }
    }
  })();

  const assertOpen = (): void => {
    if (closing) {
      throw new OpstateError(
        OpstateErrorCode.TRANSPORT,
        'The transport is closed; create a new one.',
      );
    }
  };

  const publishOne = async (route: Route, message: DispatchMessage): Promise<PublishResult> => {
    assertOpen();
    const data = encodeDispatch(message, maxMessageBytes);
    const subject = names.subject(route);
    try {
      const ack = await js.publish(subject, data, {
        msgID: dispatchMsgId(message),
        expect: { streamName: names.stream },
      });
      hub.countPublish(ack.duplicate);
      return { duplicate: ack.duplicate };
    } catch (err) {
      throw translateJetStreamError(err, 'publish', { subject, msgId: dispatchMsgId(message) });
    }
  };

  const transport: JetStreamTransport = {
    timing,
    connection: nc,
    heartbeats: new JetStreamHeartbeats(
      openBucket,
      timing,
      async () => {
        await openBucket();
        const prefix = `$KV.${names.heartbeatBucket}.`;
        const info = await jsm.streams.info(`KV_${names.heartbeatBucket}`, {
          subjects_filter: `${prefix}worker.>`,
        });
        return Object.keys(info.state.subjects ?? {}).map((s) => s.slice(prefix.length));
      },
      (event) => hub.emit(event),
    ),
    get openSubscriptions() {
      return subscriptions.size;
    },
    async ensure(routes) {
      assertOpen();
      try {
        await ensureDispatchStream(jsm, names, timing, routes, {
          maxAckPending,
          maxBytes: maxStreamBytes,
        });
        await openBucket();
        await capHeartbeatValues(jsm, `KV_${names.heartbeatBucket}`);
      } catch (err) {
        throw translateJetStreamError(err, 'ensure', { stream: names.stream });
      }
    },
    publish: publishOne,
    async publishMany(items: readonly PublishItem[]) {
      const results: PublishManyResult[] = new Array(items.length);
      let next = 0;
      const lane = async (): Promise<void> => {
        while (next < items.length) {
          const i = next++;
          const item = items[i] as PublishItem;
          try {
            const r = await publishOne(item.route, item.message);
            results[i] = { ok: true, duplicate: r.duplicate };
          } catch (err) {
            results[i] = { ok: false, error: err instanceof Error ? err : new Error(String(err)) };
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(publishWindow, items.length) }, lane));
      return results;
    },
    consume(route: Route, opts: ConsumeOptions, handler: DeliveryHandler): Subscription {
      assertOpen();
      if (!Number.isSafeInteger(opts.concurrency) || opts.concurrency < 1) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `consume() concurrency must be a positive integer; got ${String(opts.concurrency)}.`,
          { details: { concurrency: opts.concurrency } },
        );
      }
      watcher.start();
      const durable = names.consumer(route);
      let handle: Promise<Consumer> | undefined;
      const getConsumer = (): Promise<Consumer> => {
        handle ??= js.consumers.get(names.stream, durable).catch((err: unknown) => {
          handle = undefined;
          throw err;
        });
        return handle;
      };
      const deps = {
        hub,
        maxMessageBytes,
        handlerErrorNak: {
          baseMs: options.handlerErrorNakDelayMs ?? 1000,
          maxMs: options.handlerErrorNakMaxDelayMs ?? 60_000,
        },
        confirmAcks: options.confirmAcks ?? false,
        pullExpiresMs,
        flush,
        clock,
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
    },
    async unsettled() {
      try {
        return await unsettledDispatches(jsm, names.stream, maxMessageBytes);
      } catch (err) {
        throw translateJetStreamError(err, 'read unsettled dispatches', { stream: names.stream });
      }
    },
    onEvent: (listener) => hub.on(listener),
    stats: () => hub.stats(),
    close() {
      closing ??= (async () => {
        await Promise.all([...subscriptions].map((s) => s.stop()));
        watcher.stop();
        statuses.stop?.();
        if (ownConnection && !nc.isClosed()) {
          await Promise.race([nc.flush(), systemClock.sleep(2000)]).catch(() => {});
          await nc.close();
        }
        await statusLoop.catch(() => {});
      })();
      return closing;
    },
    async destroy() {
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
