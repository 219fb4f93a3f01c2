import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../actors/Logger.ts';
import type { Runtime } from '../actors/Runtime.ts';
import type { AttentionTiming } from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import { systemClock } from '../machines/Clock.ts';
import { isOperationKind, OPERATION_KINDS } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../machines/operationMachine.ts';
import { OPERATOR_ACTIONS, type OperatorAction, operatorEvent } from '../machines/operatorEvent.ts';
import { shortId } from '../machines/shortId.ts';
import { checkId } from '../persistence/applyEvents.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { Heartbeats } from '../transport/Transport.ts';
import { createDashboardData } from './dashboardData.ts';
import { html, type SafeHtml } from './html.ts';
import { page } from './layout.ts';
import { attentionCategoryPage, operationListPage } from './listPages.ts';
import { createLiveUpdates } from './liveUpdates.ts';
import { operationPage } from './operationPage.ts';
import { overviewPage } from './overviewPage.ts';

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

function statusOf(err: OpstateError): number {
  switch (err.code) {
    case OpstateErrorCode.BAD_INPUT:
      return 400;
    case OpstateErrorCode.NOT_FOUND:
      return 404;
    case OpstateErrorCode.INVALID_EVENT:
    case OpstateErrorCode.STALE_ATTEMPT:
    case OpstateErrorCode.CONFLICT:
    case OpstateErrorCode.UNSAFE:
      return 409;
    default:
      return 500;
  }
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 16_384) {
      throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'request body too large (16 KB at most)');
    }
    chunks.push(chunk as Buffer);
  }
  if (chunks.length === 0) return {};
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error();
    return value as Record<string, unknown>;
  } catch {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'the body must be a JSON object such as {"reason": "…"}',
    );
  }
}

/**
 * The operator's web dashboard on the control plane's database: counts per kind × status on the
 * lifecycle drawn from the machine definition, the attention list, a page per operation, paged
 * lists, live updates (a server-sent event when a transition or a breaker changes, on which
 * open pages refresh their content without reloading) and, only when given `command`, the
 * operator actions through the same machine events as the CLI. Every query is paged and
 * indexed. No dependency beyond Node's http.
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

  const send = (res: ServerResponse, status: number, type: string, body: string) => {
    res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
    res.end(body);
  };
  const sendJson = (res: ServerResponse, status: number, body: unknown) =>
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(body));
  const sendPage = (res: ServerResponse, url: URL, title: string, content: SafeHtml) =>
    send(
      res,
      200,
      'text/html; charset=utf-8',
      url.searchParams.get('fragment') === '1'
        ? content.value
        : page(title, content, { allowActions }),
    );

  const act = async (
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    action: OperatorAction,
  ) => {
    if (options.command === null) {
      sendJson(res, 403, {
        code: 'READ_ONLY',
        message:
          'this dashboard is read-only; start it with --allow-actions to retry, reset or cancel',
      });
      return;
    }
    // A custom header makes a cross-site form or fetch need a preflight, which is never granted.
    if (req.headers['x-opstate-action'] !== '1') {
      sendJson(res, 403, {
        code: 'BAD_INPUT',
        message: 'operator actions need the x-opstate-action: 1 header',
      });
      return;
    }
    const body = await readJson(req);
    const reason =
      typeof body.reason === 'string' && body.reason.trim() !== '' ? body.reason.trim() : undefined;
    const t = await options.command(checkId(id), operatorEvent(action, reason));
    logger.log('INFO', 'operator action from the dashboard', {
      operationId: id,
      action,
      from: t.from,
      to: t.status,
    });
    sendJson(res, 200, {
      ok: true,
      from: t.from,
      status: t.status,
      attempt: t.context.attempt,
      message: `${action}: ${t.from} → ${t.status} (attempt ${t.context.attempt})`,
    });
  };

  const operations = async (url: URL): Promise<{ title: string; content: SafeHtml }> => {
    const kind = url.searchParams.get('kind');
    const status = url.searchParams.get('status') as OperationStatus;
    if (!OPERATION_STATUSES.includes(status)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `status must be one of ${OPERATION_STATUSES.join(', ')}`,
      );
    }
    if (kind !== null && !isOperationKind(kind)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `kind must be one of ${OPERATION_KINDS.join(', ')}`,
      );
    }
    if (kind === null) {
      // Every kind: each kind's first page (one index range each).
      const pages = await Promise.all(
        OPERATION_KINDS.map(async (k) => ({ k, ...(await data.operations(k, status, null)) })),
      );
      const content = pages
        .filter((p) => p.rows.length > 0)
        .map((p) => operationListPage({ kind: p.k, status }, p.rows, p.next));
      return { title: status, content: html`${content}` };
    }
    const { rows, next } = await data.operations(kind, status, url.searchParams.get('after'));
    return { title: `${kind} ${status}`, content: operationListPage({ kind, status }, rows, next) };
  };

  const route = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const parts = url.pathname.split('/').filter(Boolean);
    const method = req.method ?? 'GET';
    if (method === 'POST') {
      const [api, ops, id, action] = parts;
      if (api === 'api' && ops === 'operations' && id !== undefined && parts.length === 4) {
        if (!OPERATOR_ACTIONS.includes(action as OperatorAction)) {
          throw new OpstateError(
            OpstateErrorCode.BAD_INPUT,
            `unknown action '${action}'; use ${OPERATOR_ACTIONS.join(', ')}`,
          );
        }
        return act(req, res, id, action as OperatorAction);
      }
      return sendJson(res, 404, { code: 'NOT_FOUND', message: `no ${url.pathname}` });
    }
    if (method !== 'GET') return sendJson(res, 405, { code: 'BAD_INPUT', message: 'GET or POST' });
    const [first, second, third] = parts;
    switch (url.pathname) {
      case '/':
        return sendPage(res, url, 'Overview', overviewPage(await data.overview()));
      case '/events':
        return live.attach(req, res);
      case '/api/overview':
        return sendJson(res, 200, await data.overview());
      case '/attention': {
        const section = await data.attention(
          url.searchParams.get('category') ?? '',
          url.searchParams.get('after') ?? undefined,
        );
        return sendPage(res, url, 'Attention', attentionCategoryPage(section));
      }
      case '/operations': {
        const { title, content } = await operations(url);
        return sendPage(res, url, title, content);
      }
    }
    if (first === 'operations' && second !== undefined && parts.length === 2) {
      const content = operationPage({ ...(await data.operation(second)), allowActions });
      return sendPage(res, url, `operation ${shortId(second)}`, content);
    }
    if (first === 'api' && second === 'operations' && third !== undefined && parts.length === 3) {
      return sendJson(res, 200, await data.operation(third));
    }
    return send(res, 404, 'text/plain; charset=utf-8', `no page at ${url.pathname}`);
  };

  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (err instanceof OpstateError) {
        sendJson(res, statusOf(err), { code: err.code, message: err.message });
        return;
      }
      logger.log('ERROR', 'dashboard request failed', {
        url: req.url,
        error: err instanceof Error ? err.message : String(err),
      });
      sendJson(res, 500, {
        code: 'INTERNAL',
        message: 'the dashboard failed on this request; see its log',
      });
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
