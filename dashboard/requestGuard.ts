import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { operatorNameProblem } from '../machines/actors.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** The names a browser on the dashboard's own machine reaches it by. */
export const LOOPBACK_HOSTS: readonly string[] = Object.freeze(['localhost', '127.0.0.1', '[::1]']);

/** The cookie the sign-in form sets (HttpOnly, SameSite=Strict): the token, for the pages' own requests. */
export const TOKEN_COOKIE = 'opstate_token';

/** Who sent a request: the operator's name and address, and the history's `by` for them. */
export interface RequestActor {
  readonly operator: string;
  readonly address: string;
  /** `operatorActor(operator, 'dashboard, <address>')`. */
  readonly by: string;
}

/** One accepted token and the operator it names. */
export interface DashboardToken {
  readonly name: string;
  readonly secret: string;
}

/**
 * Whether `host` (an address the dashboard listens on) is reachable only from its own machine:
 * `localhost`, 127.0.0.0/8 or ::1. `0.0.0.0` and `::` listen on every interface and are not.
 *
 * @example
 * ```ts
 * isLoopbackAddress('127.0.0.1'); // true
 * isLoopbackAddress('0.0.0.0');   // false
 * ```
 */
export function isLoopbackAddress(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (bare === 'localhost' || bare === '::1') return true;
  return isIP(bare) === 4 && bare.startsWith('127.');
}

/** A Host header's name without its port, lower case: `[::1]:8090` → `[::1]`. */
function hostName(value: string): string {
  const lower = value.trim().toLowerCase();
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1);
  const colon = lower.indexOf(':');
  return colon === -1 ? lower : lower.slice(0, colon);
}

/**
 * The host names the dashboard answers to: the loopback names, the address it listens on when
 * that is one interface (not `0.0.0.0` or `::`), and the names the operator allows
 * (`--allowed-host`). A request naming any other host — a DNS-rebinding page's, whose name now
 * points here — is refused before it is read.
 *
 * @example
 * ```ts
 * allowedHosts('10.0.0.5', ['ops.example.org']); // localhost, 127.0.0.1, [::1], 10.0.0.5, ops.example.org
 * ```
 */
export function allowedHosts(listen: string, extra: readonly string[]): ReadonlySet<string> {
  const hosts = new Set(LOOPBACK_HOSTS);
  const bare = listen.replace(/^\[|\]$/g, '').toLowerCase();
  if (bare !== '0.0.0.0' && bare !== '::' && bare !== '') {
    hosts.add(isIP(bare) === 6 ? `[${bare}]` : bare);
  }
  for (const h of extra) {
    const name = hostName(h);
    if (name !== '') hosts.add(isIP(name) === 6 ? `[${name}]` : name);
  }
  return hosts;
}

/**
 * The dashboard's tokens from `OPSTATE_DASHBOARD_TOKEN`: comma-separated entries, each
 * `name:secret` (the name is recorded as the operator of what that token does) or a bare secret
 * (recorded under `fallbackName`). A secret is at least 16 characters.
 *
 * @example
 * ```ts
 * parseTokens('alice:4f1c…,bob:9a0e…', 'operator'); // [{ name: 'alice', … }, { name: 'bob', … }]
 * ```
 */
export function parseTokens(value: string, fallbackName: string): DashboardToken[] {
  const tokens = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const colon = entry.indexOf(':');
      const name = colon === -1 ? fallbackName : entry.slice(0, colon);
      const secret = colon === -1 ? entry : entry.slice(colon + 1);
      const problem = operatorNameProblem(name);
      if (problem !== undefined) {
        throw new OpstateError(
          OpstateErrorCode.CONFIG,
          `OPSTATE_DASHBOARD_TOKEN: a token's name ${problem}`,
        );
      }
      if (secret.length < 16) {
        throw new OpstateError(
          OpstateErrorCode.CONFIG,
          `OPSTATE_DASHBOARD_TOKEN: the token named '${name}' is shorter than 16 characters; use a long random one (for example: openssl rand -base64 32)`,
        );
      }
      return { name, secret };
    });
  if (tokens.length === 0) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'OPSTATE_DASHBOARD_TOKEN is set but names no token; give name:secret entries separated by commas',
    );
  }
  return tokens;
}

/** A new random token secret (32 bytes, base64url). */
export function generateTokenSecret(): string {
  return randomBytes(32).toString('base64url');
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * The token `presented` matches, compared in constant time (each secret's SHA-256 against the
 * presented one's, so neither its length nor where it differs shows in the time taken); every
 * token is compared, whichever matches.
 */
export function matchToken(
  tokens: readonly DashboardToken[],
  presented: string | undefined,
): DashboardToken | undefined {
  if (presented === undefined || presented === '') return undefined;
  const given = digest(presented);
  let found: DashboardToken | undefined;
  for (const token of tokens) {
    if (timingSafeEqual(digest(token.secret), given) && found === undefined) found = token;
  }
  return found;
}

/** The token a request presents: `Authorization: Bearer …`, else the sign-in cookie. */
export function presentedToken(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return match?.[1];
  }
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === TOKEN_COOKIE) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** Why a request's Host or Origin is refused, or `undefined` when both are the dashboard's. */
export function hostOrOriginProblem(
  req: IncomingMessage,
  hosts: ReadonlySet<string>,
): string | undefined {
  const host = req.headers.host;
  if (host === undefined || !hosts.has(hostName(host))) {
    return `the Host ${JSON.stringify((host ?? '').slice(0, 80))} is not one this dashboard answers to (${[...hosts].join(', ')}); to reach it by another name, start it with --allowed-host <name>`;
  }
  const origin = req.headers.origin;
  if (origin === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(origin);
  } catch {
    parsed = undefined;
  }
  const sameOrigin =
    parsed !== undefined &&
    (parsed.protocol === 'http:' || parsed.protocol === 'https:') &&
    parsed.host === host.trim().toLowerCase();
  if (!sameOrigin) {
    return `a request from the page at ${JSON.stringify(origin.slice(0, 80))} is refused: only the dashboard's own pages may call it`;
  }
  return undefined;
}

/** The sha256 hashes (base64) of the inline scripts the pages carry, for `script-src`. */
function scriptHashes(scripts: readonly string[]): string {
  return scripts
    .map((s) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`)
    .join(' ');
}

/**
 * The headers every dashboard response carries: a Content-Security-Policy that runs only the
 * pages' own script (by its hash), fetches only from the dashboard, and lets no other site frame
 * it (`frame-ancestors 'none'`, and `X-Frame-Options: DENY` for older browsers); `nosniff`; no
 * referrer.
 *
 * @example
 * ```ts
 * for (const [name, value] of Object.entries(securityHeaders([SCRIPT]))) res.setHeader(name, value);
 * ```
 */
export function securityHeaders(scripts: readonly string[]): Readonly<Record<string, string>> {
  return Object.freeze({
    'content-security-policy': [
      "default-src 'none'",
      `script-src ${scriptHashes(scripts)}`,
      // The pages' one <style> block and the lifecycle drawing's attributes.
      "style-src 'unsafe-inline'",
      "img-src 'self' data:",
      "connect-src 'self'",
      "form-action 'self'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  });
}

/** Writes a refusal as JSON (the guard answers before any page is rendered). */
export function refuse(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
  });
  res.end(JSON.stringify({ code, message }));
}
