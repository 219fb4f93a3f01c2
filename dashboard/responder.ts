import type { IncomingMessage, ServerResponse } from 'node:http';
import { OpstateErrorCode } from '../machines/OpstateError.ts';
import { errorPage } from './errorPage.ts';
import type { SafeHtml } from './html.ts';
import { page } from './layout.ts';

/** How the dashboard answers a request: JSON, a page (or its fragment), or an error. */
export interface Responder {
  json(res: ServerResponse, status: number, body: unknown): void;
  /** A page in the layout, or only its content when the request asks for `fragment=1`. */
  page(res: ServerResponse, url: URL, title: string, content: SafeHtml, status?: number): void;
  /** An error: an HTML page in the layout for a browser, JSON for a script or the API. */
  error(
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    code: string,
    message: string,
  ): void;
}

/** A person's browser (it asks for HTML) on a page; scripts and the JSON API get JSON. */
export function wantsHtml(req: IncomingMessage, url: URL): boolean {
  if (url.pathname.startsWith('/api/') || url.pathname === '/events') return false;
  return (req.headers.accept ?? '').includes('text/html');
}

/** The HTTP status an `OpstateError`'s code answers with. */
export function statusOf(code: string): number {
  switch (code) {
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

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

/**
 * The dashboard's ways of answering; pages show the action buttons only when `allowActions`.
 *
 * @example
 * ```ts
 * const respond = responder(false);
 * respond.json(res, 200, { ok: true });
 * respond.error(req, res, 404, 'NOT_FOUND', 'no page at /x');
 * ```
 */
export function responder(allowActions: boolean): Responder {
  const json = (res: ServerResponse, status: number, body: unknown) =>
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(body));
  const inLayout = (
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
  return {
    json,
    page: inLayout,
    error(req, res, status, code, message) {
      const url = new URL(req.url ?? '/', 'http://dashboard');
      if (!wantsHtml(req, url)) return json(res, status, { code, message });
      const content = errorPage({ status, code, message, path: url.pathname });
      return inLayout(res, url, `${status} ${code}`, content, status);
    },
  };
}
