import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AttentionTiming } from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import { systemClock } from '../machines/Clock.ts';
import { OpstateError } from '../machines/OpstateError.ts';
import type { Logger } from '../observe/Logger.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { Runtime } from '../runtime/Runtime.ts';
import type { Heartbeats } from '../transport/Transport.ts';
import { createDashboardData } from './dashboardData.ts';
import { createLiveUpdates } from './liveUpdates.ts';
import { operatorActions } from './operatorActions.ts';
import { responder, statusOf } from './responder.ts';
import { routeRequest } from './routeRequest.ts';

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
}

/** A running dashboard. */
export interface Dashboard {
  /** `http://host:port`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
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

  const respond = responder(allowActions);
  const routes = {
    data,
    live,
    actions: operatorActions(options.command, respond, logger),
    respond,
    allowActions,
  };

  const server = createServer((req, res) => {
    routeRequest(routes, req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (err instanceof OpstateError) {
        respond.error(req, res, statusOf(err.code), err.code, err.message);
        return;
      }
      logger.log('ERROR', 'dashboard request failed', { url: req.url, err });
      respond.error(req, res, 500, 'INTERNAL', 'the dashboard failed on this request; see its log');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8090, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? '127.0.0.1';
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    async close() {
      await live.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections?.();
    },
  };
}
