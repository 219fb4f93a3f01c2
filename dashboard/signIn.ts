import type { IncomingMessage, ServerResponse } from 'node:http';
import { html } from './html.ts';
import { type DashboardToken, matchToken, TOKEN_COOKIE } from './requestGuard.ts';
import type { Responder } from './responder.ts';

/** The sign-in form's body (urlencoded, 4 KB at most), or `undefined` when it is larger. */
async function formBody(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 4_096) return undefined;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function signInPage(respond: Responder, res: ServerResponse, url: URL, refused: boolean): void {
  const content = html`<section class="card"><h1>Sign in</h1>
<p>This dashboard takes operator actions and is reachable from other machines, so it asks for its token: the one in <code>OPSTATE_DASHBOARD_TOKEN</code>, or the one <code>opstate dashboard</code> printed when it started.</p>
${refused ? html`<div class="result refused" role="alert">That token is not one this dashboard accepts.</div>` : ''}
<form class="search" method="post" action="/signin"><input type="password" name="token" autocomplete="current-password" aria-label="token" required><button type="submit">Sign in</button></form></section>`;
  respond.page(res, url, 'Sign in', content, refused ? 401 : 200);
}

/**
 * The sign-in page of a dashboard that asks for a token: `GET /signin` shows the form, and
 * `POST /signin` with a token it accepts sets it as an HttpOnly, SameSite=Strict cookie (sent
 * with the pages' own requests only) and goes to the overview.
 *
 * @example
 * ```ts
 * if (url.pathname === '/signin') return signIn(req, res, url, tokens, respond);
 * ```
 */
export async function signIn(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  tokens: readonly DashboardToken[],
  respond: Responder,
): Promise<void> {
  if (req.method !== 'POST') return signInPage(respond, res, url, false);
  const token = (await formBody(req))?.get('token') ?? undefined;
  if (matchToken(tokens, token) === undefined || token === undefined) {
    return signInPage(respond, res, url, true);
  }
  res.writeHead(303, {
    location: '/',
    'set-cookie': `${TOKEN_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`,
    'cache-control': 'no-store',
  });
  res.end();
}
