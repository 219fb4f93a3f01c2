import type { IncomingMessage, ServerResponse } from 'node:http';
import { OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../machines/operationMachine.ts';
import { OPERATOR_ACTIONS, type OperatorAction } from '../machines/operatorEvent.ts';
import { PACKAGE_STATES, type PackageState } from '../machines/packageState.ts';
import {
  PHYSICAL_COPY_STATUSES,
  type PhysicalCopyStatus,
} from '../machines/physicalCopyMachine.ts';
import { shortId } from '../machines/shortId.ts';
import { searchText } from '../persistence/searchText.ts';
import { attentionCategoryPage } from './attentionCategoryPage.ts';
import { copiesPage } from './copiesPage.ts';
import type { DashboardData } from './dashboardData.ts';
import type { SafeHtml } from './html.ts';
import type { createLiveUpdates } from './liveUpdates.ts';
import { operationPage } from './operationPage.ts';
import { operationsPage } from './operationsPage.ts';
import type { OperatorActions } from './operatorActions.ts';
import { overviewPage } from './overviewPage.ts';
import { packagePage } from './packagePage.ts';
import { packagesPage } from './packagesPage.ts';
import type { Responder } from './responder.ts';
import { workersPage } from './workersPage.ts';

/** What a dashboard's requests are answered from. */
export interface DashboardRoutes {
  readonly data: DashboardData;
  readonly live: Pick<ReturnType<typeof createLiveUpdates>, 'attach'>;
  readonly actions: OperatorActions;
  readonly respond: Responder;
  readonly allowActions: boolean;
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

async function operations(
  routes: DashboardRoutes,
  url: URL,
): Promise<{ title: string; content: SafeHtml }> {
  const filter = {
    kind: oneOf<OperationKind>(url, 'kind', OPERATION_KINDS),
    status: oneOf<OperationStatus>(url, 'status', OPERATION_STATUSES),
    text: searchText(url.searchParams.get('q')),
  };
  const { rows, next } = await routes.data.operations(filter, url.searchParams.get('after'));
  const title = [filter.kind, filter.status].filter(Boolean).join(' ') || 'All operations';
  return {
    title,
    content: operationsPage({ filter, rows, next, allowActions: routes.allowActions }),
  };
}

async function copies(routes: DashboardRoutes, url: URL): Promise<SafeHtml> {
  const filter = {
    status: oneOf<PhysicalCopyStatus>(url, 'status', PHYSICAL_COPY_STATUSES),
    text: searchText(url.searchParams.get('q')),
  };
  const found = await routes.data.copies({
    ...filter,
    copiesAfter: url.searchParams.get('copiesAfter'),
    deletionsAfter: url.searchParams.get('deletionsAfter'),
  });
  return copiesPage({ filter, ...found });
}

/** A POST: an operator action on one operation, or a bulk retry. */
async function routePost(
  routes: DashboardRoutes,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  parts: readonly string[],
): Promise<void> {
  const [api, ops, id, action] = parts;
  if (api === 'api' && ops === 'operations' && id === 'retry' && parts.length === 3) {
    return routes.actions.retryMany(req, res);
  }
  if (api === 'api' && ops === 'operations' && id !== undefined && parts.length === 4) {
    if (!OPERATOR_ACTIONS.includes(action as OperatorAction)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `unknown action '${action}'; use ${OPERATOR_ACTIONS.join(', ')}`,
      );
    }
    return routes.actions.act(req, res, id, action as OperatorAction);
  }
  return routes.respond.json(res, 404, { code: 'NOT_FOUND', message: `no ${url.pathname}` });
}

/** A GET: a page, its JSON, or the live-update stream. */
async function routeGet(
  routes: DashboardRoutes,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  parts: readonly string[],
): Promise<void> {
  const { data, respond } = routes;
  switch (url.pathname) {
    case '/':
      return respond.page(res, url, 'Overview', overviewPage(await data.overview()));
    case '/events':
      return routes.live.attach(req, res);
    case '/api/overview':
      return respond.json(res, 200, await data.overview());
    case '/attention': {
      const section = await data.attention(
        url.searchParams.get('category') ?? '',
        url.searchParams.get('after') ?? undefined,
      );
      return respond.page(res, url, 'Attention', attentionCategoryPage(section));
    }
    case '/operations': {
      const { title, content } = await operations(routes, url);
      return respond.page(res, url, title, content);
    }
    case '/workers':
      return respond.page(res, url, 'Workers and queues', workersPage(await data.workers()));
    case '/api/workers':
      return respond.json(res, 200, await data.workers());
    case '/copies':
      return respond.page(res, url, 'Copies and deletions', await copies(routes, url));
    case '/packages': {
      const state = oneOf<PackageState>(url, 'state', PACKAGE_STATES);
      const found = await data.packages(state, url.searchParams.get('after'));
      return respond.page(res, url, `Packages ${state ?? ''}`.trim(), packagesPage(found));
    }
  }
  const [first, second, third] = parts;
  if (first === 'operations' && second !== undefined && parts.length === 2) {
    const content = operationPage({
      ...(await data.operation(second)),
      allowActions: routes.allowActions,
    });
    return respond.page(res, url, `operation ${shortId(second)}`, content);
  }
  if (first === 'api' && second === 'operations' && third !== undefined && parts.length === 3) {
    return respond.json(res, 200, await data.operation(third));
  }
  if (first === 'packages' && second !== undefined && parts.length === 2) {
    const found = await data.package(second);
    return respond.page(res, url, `package ${found.record.name}`, packagePage(found));
  }
  if (first === 'api' && second === 'packages' && third !== undefined && parts.length === 3) {
    const { record, step } = await data.package(third);
    return respond.json(res, 200, { ...record, step });
  }
  return respond.error(
    req,
    res,
    404,
    'NOT_FOUND',
    `no page at ${url.pathname}; the pages are /, /operations, /packages, /workers and /copies`,
  );
}

/**
 * Answers one dashboard request: a POST is an operator action, a GET a page or its JSON; any
 * other method is refused with 405. Errors it throws are the caller's to answer.
 *
 * @example
 * ```ts
 * createServer((req, res) => { routeRequest(routes, req, res).catch(answerFailure); });
 * ```
 */
export async function routeRequest(
  routes: DashboardRoutes,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://dashboard');
  const parts = url.pathname.split('/').filter(Boolean);
  const method = req.method ?? 'GET';
  if (method === 'POST') return routePost(routes, req, res, url, parts);
  if (method !== 'GET') {
    return routes.respond.error(
      req,
      res,
      405,
      'BAD_INPUT',
      `${method} is not answered here: use GET or POST`,
    );
  }
  return routeGet(routes, req, res, url, parts);
}
