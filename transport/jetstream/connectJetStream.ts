import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { acceptsAnonymous, anonymousNatsRefusal } from './anonymousNats.ts';
import {
  type NatsCredentials,
  natsConnectOptions,
  redactServers,
  splitServers,
} from './natsCredentials.ts';
import { settleRequestsCheaply } from './settleRequestsCheaply.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

/** Where and how to connect; with `connection` given, that connection is used as it is. */
export interface JetStreamConnectOptions {
  readonly servers?: string | string[];
  readonly credentials?: NatsCredentials;
  readonly connection?: NatsConnection;
  /** The connection's name, as the server lists it. */
  readonly name: string;
  readonly connectTimeoutMs?: number;
  /**
   * How often the client pings its server [`DEFAULT_PING_INTERVAL_MS`]; two unanswered pings
   * and it moves to another server of the cluster.
   */
  readonly pingIntervalMs?: number;
  /** JetStream API request timeout (ms). */
  readonly requestTimeoutMs: number;
  /**
   * Run on a server that accepts clients without credentials (a development server). Without it
   * such a server is refused with `CONFIG` (see `acceptsAnonymous`).
   */
  readonly insecureNats?: boolean;
  /**
   * The prefix of this connection's reply subjects (`<prefix>.<id>`) instead of `_INBOX`, so that
   * the server's permissions can let each role subscribe to its own replies only.
   */
  readonly inboxPrefix?: string;
}

/**
 * How often a connection pings its server (10 s). A server that is frozen, or cut off without
 * closing its sockets, is noticed after two unanswered pings (20–30 s) and the client moves to
 * another server in the URL list; the client library's own default (2 minutes) would leave a
 * worker on a frozen cluster node deaf for four to six.
 */
export const DEFAULT_PING_INTERVAL_MS = 10_000;

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
 * Connects to NATS (reconnecting for ever) and opens the JetStream manager; failures are
 * `OpstateError`s naming the servers, a TLS connect that timed out without a client certificate
 * says how to give one. A server that accepts anonymous clients is refused with `CONFIG` unless
 * `insecureNats` (`anonymous` says whether it does). A connection this opened is closed again when
 * it is refused or the manager fails.
 *
 * @example
 * ```ts
 * const { nc, jsm } = await connectJetStream({ servers: 'nats://127.0.0.1:4222',
 *   name: 'opstate-opstate', requestTimeoutMs: 5000 });
 * ```
 */
export async function connectJetStream(
  options: JetStreamConnectOptions,
): Promise<{ nc: NatsConnection; jsm: JetStreamManager; anonymous: boolean }> {
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
        name: options.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        pingInterval: options.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
        maxPingOut: 2,
        // Otherwise every request (each publish, each heartbeat) builds two Errors with stack
        // traces up front, in case it fails: a large share of a busy process's time. Failures are
        // translated into OpstateErrors naming the operation and subject anyway.
        noAsyncTraces: true,
        ...(options.inboxPrefix === undefined ? {} : { inboxPrefix: options.inboxPrefix }),
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
  // A given connection's credentials are not known here: only its server's INFO tells.
  const anonymous = acceptsAnonymous(
    nc.info,
    options.connection === undefined ? options.credentials : 'unknown',
    servers,
  );
  if (anonymous && options.insecureNats !== true) {
    if (options.connection === undefined) await nc.close();
    throw anonymousNatsRefusal(redactServers(options.servers ?? servers));
  }
  try {
    const jsm = await jetstreamManager(nc, { timeout: options.requestTimeoutMs });
    return { nc, jsm, anonymous };
  } catch (err) {
    if (options.connection === undefined) await nc.close();
    throw translateJetStreamError(err, 'connect', { servers: redactServers(options.servers) });
  }
}
