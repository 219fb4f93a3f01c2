import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OPERATOR, operatorActor } from '../machines/actors.ts';
import type { AttentionTiming } from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import { systemClock } from '../machines/Clock.ts';
import { OpstateError } from '../machines/OpstateError.ts';
import type { Logger } from '../observe/Logger.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { Runtime } from '../runtime/Runtime.ts';
import type { Heartbeats } from '../transport/Transport.ts';
import { createDashboardData } from './dashboardData.ts';
import { PAGE_SCRIPTS } from './layout.ts';
import { createLiveUpdates } from './liveUpdates.ts';
import { operatorActions } from './operatorActions.ts';
import {
  allowedHosts,
  type DashboardToken,
  generateTokenSecret,
  hostOrOriginProblem,
  isLoopbackAddress,
  matchToken,
  presentedToken,
  type RequestActor,
  refuse,
  securityHeaders,
} from './requestGuard.ts';
import { type Responder, responder, statusOf, wantsHtml } from './responder.ts';
import { routeRequest } from './routeRequest.ts';
import { signIn } from './signIn.ts';

export interface DashboardOptions {
  readonly database: Database;
  /** The timers the attention rules measure against (the runtime's). */
  readonly timing: AttentionTiming;
  /** Where heartbeats are read; null when they are not visible from this process. */
  readonly heartbeats: Heartbeats | null;
  /**
   * Sends an operator event the way `opstate retry|reset|cancel` does (`runtime.command`); null
   * makes the dashboard read-only (actions answer 403).
   */
  readonly command: Runtime['command'] | null;
  /** Port to listen on (0: any free port; default 8090). */
  readonly port?: number;
  /** Interface to listen on (default 127.0.0.1: an operator's own machine). */
  readonly host?: string;
  readonly clock?: Clock;
  readonly logger: Logger;
  /** How often to look for changes to push to open pages (default 1000 ms). */
  readonly pollMs?: number;
  /**
   * Host names it answers to besides the loopback names and the address it listens on (a
   * request naming any other Host is refused: DNS rebinding), such as `ops.example.org`.
   */
  readonly allowedHosts?: readonly string[];
  /**
   * The tokens it asks for (each names the operator of what it does). Given, every request but
   * the sign-in page needs one. Not given, it asks for none, unless `command` is given and `host`
   * is not a loopback address: then it makes one (`Dashboard.generatedToken`, named `operator`).
   */
  readonly tokens?: readonly DashboardToken[];
  /** Who actions are recorded as by when no token names the operator (default `operator`). */
  readonly operator?: string;
}

/** A running dashboard. */
export interface Dashboard {
  /** `http://host:port`. */
  readonly url: string;
  readonly port: number;
  /** Whether it asks for a token. */
  readonly tokenRequired: boolean;
  /** The token it made because actions are on at a non-loopback address and none was given. */
  readonly generatedToken?: string;
  close(): Promise<void>;
}

/** What each request passes before it is routed: its Host and Origin, then its token. */
interface Gate {
  readonly hosts: ReadonlySet<string>;
  readonly headers: Readonly<Record<string, string>>;
  /** Null: no token asked for. */
  readonly tokens: readonly DashboardToken[] | null;
  readonly operator: string;
  /** The operator each admitted request is by. */
  readonly actors: WeakMap<IncomingMessage, RequestActor>;
}

function gateOf(options: DashboardOptions, host: string): Gate & { generated?: string } {
  const operator = options.operator ?? OPERATOR;
  const needed = options.command !== null && !isLoopbackAddress(host);
  const generated = options.tokens === undefined && needed ? generateTokenSecret() : undefined;
  const tokens =
    options.tokens ?? (generated === undefined ? null : [{ name: operator, secret: generated }]);
  return {
    hosts: allowedHosts(host, options.allowedHosts ?? []),
    headers: securityHeaders(PAGE_SCRIPTS),
    tokens,
    operator,
    actors: new WeakMap(),
    ...(generated === undefined ? {} : { generated }),
  };
}

const addressOf = (req: IncomingMessage) =>
  (req.socket.remoteAddress ?? 'unknown').replace(/^::ffff:/, '');

/**
 * Admits a request or answers it: a Host or Origin not the dashboard's is refused (403), and
 * when tokens are asked for, a request without one goes to the sign-in page (a browser) or is
 * refused (401). Every answer carries the security headers.
 */
async function admit(
  gate: Gate,
  respond: Responder,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<boolean> {
  for (const [name, value] of Object.entries(gate.headers)) res.setHeader(name, value);
  const problem = hostOrOriginProblem(req, gate.hosts);
  if (problem !== undefined) {
    refuse(res, 403, 'FORBIDDEN', problem);
    return false;
  }
  const address = addressOf(req);
  if (gate.tokens === null) {
    const by = operatorActor(gate.operator, `dashboard, ${address}`);
    gate.actors.set(req, { operator: gate.operator, address, by });
    return true;
  }
  const url = new URL(req.url ?? '/', 'http://dashboard');
  if (url.pathname === '/signin') {
    await signIn(req, res, url, gate.tokens, respond);
    return false;
  }
  const token = matchToken(gate.tokens, presentedToken(req));
  if (token === undefined) {
    if (req.method === 'GET' && wantsHtml(req, url)) {
      res.writeHead(303, { location: '/signin', 'cache-control': 'no-store' });
      res.end();
    } else {
      refuse(
        res,
        401,
        'UNAUTHORIZED',
        'this dashboard asks for its token: send Authorization: Bearer <token>, or sign in at /signin',
      );
    }
    return false;
  }
  const by = operatorActor(token.name, `dashboard, ${address}`);
  gate.actors.set(req, { operator: token.name, address, by });
  return true;
}

/**
 * The operator's web dashboard on the control plane's database: the overview (counts per kind ×
 * status on the lifecycle drawn from the machine definition, the attention list), every
 * operation searched and paged (`/operations`), a page per operation, the workers and queues
 * (`/workers`), the copies and deletions (`/copies`), live updates (a server-sent event when a
 * transition or a breaker changes, on which open pages refresh their content without reloading)
 * and, only when given `command`, the operator actions through the same machine events as the
 * CLI, one at a time or a retry of a FAILED list. A browser's failed request gets an error page,
 * a script's and the API's JSON. Every list is paged. No dependency beyond Node's http.
 *
 * @example
 * ```ts
 * const dashboard = await startDashboard({ database: runtime.database, timing: runtime.timing,
 *   heartbeats: runtime.transport.heartbeats, command: runtime.command, logger: runtime.logger });
 * console.log(dashboard.url);
 * ```
 */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const { logger } = options;
  const allowActions = options.command !== null;
  const clock = options.clock ?? systemClock;
  const data = createDashboardData({
    database: options.database,
    timing: options.timing,
    heartbeats: options.heartbeats,
    clock,
  });
  const live = createLiveUpdates({
    changeMark: data.changeMark,
    pollMs: options.pollMs ?? 1_000,
    clock,
    logger,
  });

  const host = options.host ?? '127.0.0.1';
  const gate = gateOf(options, host);
  const respond = responder(allowActions);
  const actorOf = (req: IncomingMessage): RequestActor =>
    gate.actors.get(req) ?? {
      operator: gate.operator,
      address: addressOf(req),
      by: operatorActor(gate.operator, `dashboard, ${addressOf(req)}`),
    };
  const routes = {
    data,
    live,
    actions: operatorActions(options.command, respond, logger, actorOf),
    respond,
    allowActions,
  };

  const server = createServer((req, res) => {
    admit(gate, respond, req, res)
      .then((admitted) => (admitted ? routeRequest(routes, req, res) : undefined))
      .catch((err: unknown) => {
        if (res.headersSent) {
          res.end();
          return;
        }
        if (err instanceof OpstateError) {
          respond.error(req, res, statusOf(err.code), err.code, err.message);
          return;
        }
        logger.log('ERROR', 'dashboard request failed', { url: req.url, err });
        respond.error(
          req,
          res,
          500,
          'INTERNAL',
          'the dashboard failed on this request; see its log',
        );
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8090, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    tokenRequired: gate.tokens !== null,
    ...(gate.generated === undefined ? {} : { generatedToken: gate.generated }),
    async close() {
      await live.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections?.();
    },
  };
}
