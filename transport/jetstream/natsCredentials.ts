import { readFileSync } from 'node:fs';
import {
  credsAuthenticator,
  type NodeConnectionOptions,
  nkeyAuthenticator,
} from '@nats-io/transport-node';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { identityOf } from '../../machines/serverIdentity.ts';

/** How the NATS client proves who it is: at most one way. */
export type NatsAuth =
  | { readonly type: 'none' }
  | { readonly type: 'user'; readonly user: string; readonly password: string }
  | { readonly type: 'token'; readonly token: string }
  | { readonly type: 'nkey'; readonly seedFile: string }
  | { readonly type: 'creds'; readonly credsFile: string };

/** Files for a TLS connection: the CA to trust, and a client certificate and key when required. */
export interface TlsFiles {
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

/** Credentials and TLS of a NATS connection. */
export interface NatsCredentials {
  readonly auth?: NatsAuth;
  /** Present (even empty): the connection must be TLS. */
  readonly tls?: TlsFiles;
}

function readSecretFile(path: string, what: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `cannot read the ${what} at ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}); check the path and that this user may read it`,
    );
  }
}

/**
 * The NATS client's connection options for the credentials: user and password, a token, an NKey
 * seed file or a `.creds` file, plus TLS files. Files are read here, once; a missing file is a
 * `CONFIG` error naming the path (never its content). With TLS, the server's certificate is
 * checked against the hosts of `servers` (see `identityOf`).
 *
 * @example
 * ```ts
 * await connect({ servers, ...natsConnectOptions({ auth: { type: 'token', token } }) });
 * ```
 */
export function natsConnectOptions(
  credentials: NatsCredentials = {},
  servers: readonly string[] = [],
): NodeConnectionOptions {
  const auth = credentials.auth ?? { type: 'none' };
  const options: NodeConnectionOptions = {};
  switch (auth.type) {
    case 'user':
      options.user = auth.user;
      options.pass = auth.password;
      break;
    case 'token':
      options.token = auth.token;
      break;
    case 'nkey': {
      const seed = new TextDecoder().decode(readSecretFile(auth.seedFile, 'NKey seed')).trim();
      options.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
      break;
    }
    case 'creds':
      options.authenticator = credsAuthenticator(readSecretFile(auth.credsFile, 'creds file'));
      break;
    case 'none':
      break;
  }
  if (credentials.tls !== undefined) {
    for (const [key, path] of Object.entries(credentials.tls)) {
      if (path !== undefined) readSecretFile(path, `TLS ${key.replace('File', '')} file`);
    }
    // The client does not tell TLS a server's host when it is an IP address (Node would check
    // the certificate against `localhost`): check it against the hosts configured.
    const hosts = servers.map(serverHost).filter((h) => h !== '');
    const identity = hosts.length > 0 ? { checkServerIdentity: identityOf(hosts) } : {};
    options.tls = { ...credentials.tls, ...identity } as NodeConnectionOptions['tls'];
  }
  return options;
}

/** The host of a server URL (`tls://10.0.0.5:4222` → `10.0.0.5`; `nats-1` → `nats-1`). */
function serverHost(server: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(server) ? server : `nats://${server}`;
  try {
    return new URL(withScheme).hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return '';
  }
}

/** `nats://a:4222,nats://b:4222` as the list the client takes. */
export function splitServers(servers: string | string[]): string[] {
  return (Array.isArray(servers) ? servers : servers.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Where a URL's user info ends in `rest` (the URL after `scheme://`), or -1 when it has none: at
 * the authority's last `@`, as a URL parser reads it, so a password holding a raw `@` counts
 * whole. When the authority holds no `@` but one comes later, at the last `@` of all: a password
 * holding a raw `/`, `?` or `#` (where a parser ends the authority) counts whole too.
 */
function userInfoEnd(rest: string): number {
  const end = rest.search(/[/?#]/);
  const at = (end === -1 ? rest : rest.slice(0, end)).lastIndexOf('@');
  return at === -1 ? rest.lastIndexOf('@') : at;
}

/**
 * A URL with the secret part of its user info replaced by `***`: `nats://u:***@host`,
 * `postgres://u:***@host/db`; a lone user-info part (a token) becomes `***`. Everything before the
 * URL's last `@` is taken as user info, wherever a URL parser would end it, so no password is
 * shown however it is written (a raw `@`, `/`, `?` or `#` in it, or no scheme before it); a URL
 * with an `@` in its path or query is shown too little, never a password.
 *
 * @example
 * ```ts
 * redactUrl('postgres://app:s3cret@db:5432/app'); // 'postgres://app:***@db:5432/app'
 * ```
 */
export function redactUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? '';
  const rest = url.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  let redacted = url;
  if (at !== -1) {
    const info = rest.slice(0, at);
    const colon = info.indexOf(':');
    const shown = colon === -1 ? '***' : `${info.slice(0, colon)}:***`;
    redacted = `${scheme}${shown}${rest.slice(at)}`;
  }
  // A password may also be given as a query parameter (postgres://db/app?password=…).
  return redacted.replace(/([?&](?:password|sslpassword)=)[^&#]*/gi, '$1***');
}

/**
 * A URL's user info (`user:password`, or a lone token): everything before the authority's last
 * `@`, as a URL parser reads it, or before the last `@` of all when the authority holds none (a
 * password holding a raw `/`, `?` or `#`). `undefined` when there is none.
 *
 * @example
 * ```ts
 * userInfoOf('postgres://app:p@ss@db/app'); // 'app:p@ss'
 * userInfoOf('nats://ops:a/b@nats-1:4222'); // 'ops:a/b'
 * ```
 */
export function userInfoOf(url: string): string | undefined {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0];
  if (scheme === undefined) return undefined;
  const rest = url.slice(scheme.length);
  const at = userInfoEnd(rest);
  return at === -1 ? undefined : rest.slice(0, at);
}

/**
 * A comma-separated list of URLs (a NATS server list, a URL variable's value) with each one's
 * secret redacted, entries kept as given.
 */
export function redactUrlList(value: string): string {
  return value.split(',').map(redactUrl).join(',');
}

/** The server list with every URL's secret redacted, for errors and logs. */
export function redactServers(servers: string | string[] | undefined): string | undefined {
  return servers === undefined ? undefined : splitServers(servers).map(redactUrl).join(',');
}
