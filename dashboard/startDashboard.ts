import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../actors/Clock.ts';
import { systemClock } from '../actors/Clock.ts';
import type { Logger } from '../actors/Logger.ts';
import type { Runtime } from '../actors/Runtime.ts';
import {
  type AttentionCategory,
  type AttentionTiming,
  classifyOperation,
  type HeartbeatFacts,
} from '../machines/attention.ts';
import { isOperationKind, OPERATION_KINDS } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../machines/operationMachine.ts';
import { OPERATOR_ACTIONS, type OperatorAction, operatorEvent } from '../machines/operatorEvent.ts';
import { checkId } from '../persistence/applyEvents.ts';
import { inspectOperation } from '../persistence/inspectOperation.ts';
import { loadAttention } from '../persistence/loadAttention.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { type StatusCounts, selectStatusCounts } from '../persistence/sql/controlPlaneQueries.ts';
import { selectAttentionRow } from '../persistence/sql/selectAttention.ts';
import { selectLineage } from '../persistence/sql/selectLineage.ts';
import { selectOperationList } from '../persistence/sql/selectOperationList.ts';
import type { Heartbeat, Heartbeats } from '../transport/Transport.ts';
import { html } from './html.ts';
import { page } from './layout.ts';
import { attentionCategoryPage, operationListPage } from './listPages.ts';
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
  /**
   * Counts per kind × status cost one index scan over every operation; they are kept while
   * nothing has changed, and for at most this long while things do (default 1000 ms; 0 never
   * keeps them).
   */
  readonly countsMaxAgeMs?: number;
}

/** A running dashboard. */
export interface Dashboard {
  /** `http://host:port`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

const PAGE_SIZE = 50;

function latestBeats(heartbeats: readonly Heartbeat[]): Map<string, number> {
  const latest = new Map<string, number>();
  for (const hb of heartbeats) {
    latest.set(hb.key.operationId, Math.max(latest.get(hb.key.operationId) ?? 0, hb.at));
  }
  return latest;
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
  const { database, timing, logger } = options;
  const clock = options.clock ?? systemClock;
  const allowActions = options.command !== null;

  const heartbeatFacts = async (): Promise<{ facts: HeartbeatFacts; all: Heartbeat[] }> => {
    if (options.heartbeats === null) return { facts: null, all: [] };
    const all = await options.heartbeats.list();
    return { facts: latestBeats(all), all };
  };

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
    content: ReturnType<typeof overviewPage>,
  ) =>
    send(
      res,
      200,
      'text/html; charset=utf-8',
      url.searchParams.get('fragment') === '1'
        ? content.value
        : page(title, content, { allowActions }),
    );

  /** Changes when a transition is written, a breaker moves or a deletion fails. */
  const changeMark = async () => {
    const [row] = await database.execute(
      `select (select coalesce(max(id), 0) from operation_transition) as t,
        (select coalesce(max(updated_at)::text, '') from circuit_breaker) as b,
        (select count(*) from physical_copy where status = 'DELETION_FAILED') as d`,
    );
    return `${row?.t}|${row?.b}|${row?.d}`;
  };

  const countsMaxAgeMs = options.countsMaxAgeMs ?? 1_000;
  let cachedCounts: { mark: string; at: number; counts: StatusCounts } | undefined;
  const counts = async (): Promise<StatusCounts> => {
    if (countsMaxAgeMs > 0) {
      const mark = await changeMark();
      const now = clock.now();
      const kept = cachedCounts;
      if (kept !== undefined && (kept.mark === mark || now - kept.at < countsMaxAgeMs)) {
        return kept.counts;
      }
      const fresh = await selectStatusCounts(database);
      cachedCounts = { mark, at: now, counts: fresh };
      return fresh;
    }
    return selectStatusCounts(database);
  };

  const overview = async () => {
    const { facts } = await heartbeatFacts();
    const [statusCounts, attention] = await Promise.all([
      counts(),
      loadAttention(database, { now: clock.now(), timing, heartbeats: facts, limit: PAGE_SIZE }),
    ]);
    return { counts: statusCounts, attention };
  };

  const operation = async (id: string) => {
    checkId(id);
    const { facts, all } = await heartbeatFacts();
    const [view, up, down, row] = await Promise.all([
      inspectOperation(database, id),
      selectLineage(database, id, 'up'),
      selectLineage(database, id, 'down'),
      selectAttentionRow(database, id),
    ]);
    const mine = all.filter((h) => h.key.operationId === id).sort((a, b) => b.at - a.at)[0];
    const heartbeat =
      options.heartbeats === null
        ? null
        : mine === undefined
          ? ('none' as const)
          : { at: mine.at, taskId: mine.key.taskId };
    const attention =
      row === undefined
        ? []
        : classifyOperation(row, { now: clock.now(), timing, heartbeats: facts });
    return { view, up, down, heartbeat, attention, allowActions };
  };

  const listFilter = (url: URL) => {
    const kind = url.searchParams.get('kind');
    const status = url.searchParams.get('status');
    if (!OPERATION_STATUSES.includes(status as OperationStatus)) {
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
    return { kind, status: status as OperationStatus };
  };

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

  // Live updates: one poll for the whole server, pushed to every open page.
  const clients = new Set<ServerResponse>();
  let lastMark = '';
  let polling: NodeJS.Timeout | undefined;
  const poll = async () => {
    try {
      const mark = await changeMark();
      if (mark !== lastMark) {
        lastMark = mark;
        for (const c of clients) c.write(`event: change\ndata: ${JSON.stringify(mark)}\n\n`);
      }
    } catch (err) {
      logger.log('WARNING', 'dashboard could not look for changes', {
        error: err instanceof Error ? err.message : String(err),
      });
    }
  };
  const events = (req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
    });
    res.write(': connected\n\n');
    clients.add(res);
    polling ??= setInterval(() => void poll(), options.pollMs ?? 1_000);
    req.on('close', () => {
      clients.delete(res);
      if (clients.size === 0 && polling !== undefined) {
        clearInterval(polling);
        polling = undefined;
      }
    });
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
    if (url.pathname === '/') return sendPage(res, url, 'Overview', overviewPage(await overview()));
    if (url.pathname === '/events') return events(req, res);
    if (url.pathname === '/api/overview') return sendJson(res, 200, await overview());
    if (url.pathname === '/attention') {
      const { facts } = await heartbeatFacts();
      const category = (url.searchParams.get('category') ?? '') as AttentionCategory;
      const list = await loadAttention(database, {
        now: clock.now(),
        timing,
        heartbeats: facts,
        limit: PAGE_SIZE,
        category,
        after: url.searchParams.get('after') ?? undefined,
      });
      return sendPage(res, url, 'Attention', attentionCategoryPage(list.sections[0] as never));
    }
    if (url.pathname === '/operations') {
      const filter = listFilter(url);
      const kinds = filter.kind === null ? OPERATION_KINDS : [filter.kind];
      if (kinds.length > 1) {
        // Across kinds: one index range per kind would interleave; show each kind's first page.
        return sendPage(res, url, filter.status, await allKinds(filter.status));
      }
      const after = url.searchParams.get('after');
      const [at, id] = (after ?? '').split(',');
      const cursor =
        after === null ? undefined : { createdAt: new Date(at ?? ''), id: checkId(id) };
      if (cursor !== undefined && Number.isNaN(cursor.createdAt.getTime())) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          'after must be a token from a previous page',
        );
      }
      const kind = kinds[0] as (typeof OPERATION_KINDS)[number];
      const rows = await selectOperationList(
        database,
        { kind, status: filter.status },
        { limit: PAGE_SIZE, after: cursor },
      );
      const last = rows.at(-1);
      const next =
        rows.length === PAGE_SIZE && last !== undefined
          ? `${last.createdAt.toISOString()},${last.id}`
          : null;
      return sendPage(
        res,
        url,
        `${kind} ${filter.status}`,
        operationListPage({ kind, status: filter.status }, rows, next),
      );
    }
    const [first, second, third] = parts;
    if (first === 'operations' && second !== undefined && parts.length === 2) {
      return sendPage(
        res,
        url,
        `operation ${second.slice(0, 8)}`,
        operationPage(await operation(second)),
      );
    }
    if (first === 'api' && second === 'operations' && third !== undefined && parts.length === 3) {
      return sendJson(res, 200, await operation(third));
    }
    return send(res, 404, 'text/plain; charset=utf-8', `no page at ${url.pathname}`);
  };

  const allKinds = async (status: OperationStatus) => {
    const sections = await Promise.all(
      OPERATION_KINDS.map(async (kind) => {
        const rows = await selectOperationList(database, { kind, status }, { limit: PAGE_SIZE });
        const last = rows.at(-1);
        const next =
          rows.length === PAGE_SIZE && last !== undefined
            ? `${last.createdAt.toISOString()},${last.id}`
            : null;
        return rows.length === 0 ? html`` : operationListPage({ kind, status }, rows, next);
      }),
    );
    return html`${sections}`;
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
      if (polling !== undefined) clearInterval(polling);
      for (const c of clients) c.end();
      clients.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections?.();
    },
  };
}
