import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AttentionTiming } from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import { systemClock } from '../machines/Clock.ts';
import { OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../machines/operationMachine.ts';
import { OPERATOR_ACTIONS, type OperatorAction, operatorEvent } from '../machines/operatorEvent.ts';
import {
  PHYSICAL_COPY_STATUSES,
  type PhysicalCopyStatus,
} from '../machines/physicalCopyMachine.ts';
import { shortId } from '../machines/shortId.ts';
import type { Logger } from '../observe/Logger.ts';
import { checkId } from '../persistence/applyEvents.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { searchText } from '../persistence/searchText.ts';
import type { Runtime } from '../runtime/Runtime.ts';
import type { Heartbeats } from '../transport/Transport.ts';
import { attentionCategoryPage } from './attentionCategoryPage.ts';
import { bulkRetry } from './bulkRetry.ts';
import { copiesPage } from './copiesPage.ts';
import { createDashboardData } from './dashboardData.ts';
import { errorPage } from './errorPage.ts';
import type { SafeHtml } from './html.ts';
import { page } from './layout.ts';
import { createLiveUpdates } from './liveUpdates.ts';
import { operationPage } from './operationPage.ts';
import { operationsPage } from './operationsPage.ts';
import { overviewPage } from './overviewPage.ts';
import { workersPage } from './workersPage.ts';

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

/** A query parameter that must be one of `allowed` when given (empty is not given). */
function oneOf<T extends string>(url: URL, name: string, allowed: readonly T[]): T | undefined {
  const value = url.searchParams.get(name);
  if (value === null || value === '') return undefined;
  if (!allowed.includes(value as T)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${name} must be one of ${allowed.join(', ')} (got ${JSON.stringify(value.slice(0, 40))})`,
    );
  }
  return value as T;
}

/** A person's browser (it asks for HTML) on a page; scripts and the JSON API get JSON. */
function wantsHtml(req: IncomingMessage, url: URL): boolean {
  if (url.pathname.startsWith('/api/') || url.pathname === '/events') return false;
  return (req.headers.accept ?? '').includes('text/html');
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

  const send = (res: ServerResponse, status: number, type: string, body: string) => {
    res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
    res.end(body);
  };
  const sendJson = (res: ServerResponse, status: number, body: unknown) =>
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(body));
  const sendPage = (
    res: ServerResponse,
    url: URL,
    title: string,
    content: SafeHtml,
    status = 200,
  ) =>
    send(
      res,
      status,
      'text/html; charset=utf-8',
      url.searchParams.get('fragment') === '1'
        ? content.value
        : page(title, content, { allowActions, path: url.pathname }),
    );
  /** An error: an HTML page in the layout for a browser, JSON for a script or the API. */
  const sendError = (
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    code: string,
    message: string,
  ) => {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    if (!wantsHtml(req, url)) return sendJson(res, status, { code, message });
    const content = errorPage({ status, code, message, path: url.pathname });
    return sendPage(res, url, `${status} ${code}`, content, status);
  };

  const act = async (
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    action: OperatorAction,
  ) => {
    if (!mayAct(req, res) || options.command === null) return;
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
    const filter = {
      kind: oneOf<OperationKind>(url, 'kind', OPERATION_KINDS),
      status: oneOf<OperationStatus>(url, 'status', OPERATION_STATUSES),
      text: searchText(url.searchParams.get('q')),
    };
    const { rows, next } = await data.operations(filter, url.searchParams.get('after'));
    const title = [filter.kind, filter.status].filter(Boolean).join(' ') || 'All operations';
    return { title, content: operationsPage({ filter, rows, next, allowActions }) };
  };

  const copies = async (url: URL): Promise<SafeHtml> => {
    const filter = {
      status: oneOf<PhysicalCopyStatus>(url, 'status', PHYSICAL_COPY_STATUSES),
      text: searchText(url.searchParams.get('q')),
    };
    const found = await data.copies({
      ...filter,
      copiesAfter: url.searchParams.get('copiesAfter'),
      deletionsAfter: url.searchParams.get('deletionsAfter'),
    });
    return copiesPage({ filter, ...found });
  };

  /** Both operator-action rules: actions allowed, and the header no cross-site form can send. */
  const mayAct = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (options.command === null) {
      sendJson(res, 403, {
        code: 'READ_ONLY',
        message:
          'this dashboard is read-only; start it with --allow-actions to retry, reset or cancel',
      });
      return false;
    }
    // A custom header makes a cross-site form or fetch need a preflight, which is never granted.
    if (req.headers['x-opstate-action'] !== '1') {
      sendJson(res, 403, {
        code: 'BAD_INPUT',
        message: 'operator actions need the x-opstate-action: 1 header',
      });
      return false;
    }
    return true;
  };

  const retryMany = async (req: IncomingMessage, res: ServerResponse) => {
    if (!mayAct(req, res) || options.command === null) return;
    const body = await readJson(req);
    const reason =
      typeof body.reason === 'string' && body.reason.trim() !== '' ? body.reason.trim() : undefined;
    const results = await bulkRetry(options.command, body.ids, reason, logger);
    const retried = results.filter((r) => r.outcome === 'retried').length;
    sendJson(res, 200, {
      ok: true,
      retried,
      refused: results.length - retried,
      results,
      message: `retried ${retried} of ${results.length}${retried === results.length ? '' : `; ${results.length - retried} refused`}`,
    });
  };

  const route = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const parts = url.pathname.split('/').filter(Boolean);
    const method = req.method ?? 'GET';
    if (method === 'POST') {
      const [api, ops, id, action] = parts;
      if (api === 'api' && ops === 'operations' && id === 'retry' && parts.length === 3) {
        return retryMany(req, res);
      }
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
    if (method !== 'GET') {
      return sendError(
        req,
        res,
        405,
        'BAD_INPUT',
        `${method} is not answered here: use GET or POST`,
      );
    }
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
      case '/workers':
        return sendPage(res, url, 'Workers and queues', workersPage(await data.workers()));
      case '/api/workers':
        return sendJson(res, 200, await data.workers());
      case '/copies':
        return sendPage(res, url, 'Copies and deletions', await copies(url));
    }
    if (first === 'operations' && second !== undefined && parts.length === 2) {
      const content = operationPage({ ...(await data.operation(second)), allowActions });
      return sendPage(res, url, `operation ${shortId(second)}`, content);
    }
    if (first === 'api' && second === 'operations' && third !== undefined && parts.length === 3) {
      return sendJson(res, 200, await data.operation(third));
    }
    return sendError(
      req,
      res,
      404,
      'NOT_FOUND',
      `no page at ${url.pathname}; the pages are /, /operations, /workers and /copies`,
    );
  };

  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (err instanceof OpstateError) {
        sendError(req, res, statusOf(err), err.code, err.message);
        return;
      }
      logger.log('ERROR', 'dashboard request failed', { url: req.url, err });
      sendError(req, res, 500, 'INTERNAL', 'the dashboard failed on this request; see its log');
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
