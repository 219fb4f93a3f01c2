import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { identityOf } from '../machines/serverIdentity.ts';

/** TLS to Postgres: `require` encrypts; `verify-full` also checks the server's certificate and name. */
export interface DatabaseTls {
  readonly mode: 'disable' | 'require' | 'verify-full';
  /** The CA that signed the server's certificate (PEM). */
  readonly caFile?: string;
  /** A client certificate and its key (PEM), when the server asks for one. */
  readonly certFile?: string;
  readonly keyFile?: string;
}

function read(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `cannot read the database TLS ${what} at ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}); check the path and that this user may read it`,
    );
  }
}

/**
 * The host names of a Postgres URL (`postgres://u@a,b:5433/db` has two), without ports or the
 * brackets of an IPv6 address; empty when the URL names none (a Unix socket).
 *
 * @example
 * ```ts
 * urlHosts('postgres://u@db1:5432,db2/app'); // ['db1', 'db2']
 * ```
 */
export function urlHosts(url: string): string[] {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?([^/?#]*)/i.exec(url)?.[1] ?? '';
  return authority
    .split(',')
    .map((h) => (h.startsWith('[') ? h.slice(1, h.indexOf(']')) : h.replace(/:\d*$/, '')))
    .map((h) => decodeURIComponent(h))
    .filter((h) => h !== '');
}

/**
 * postgres.js's `ssl` option for the settings: `false` for `disable` (a `sslmode` in the URL still
 * applies), else TLS options with the files read here. With `verify-full` and the URL's `hosts`,
 * the certificate is checked against the host the URL names, as libpq does (`identityOf`:
 * postgres.js does not tell TLS an IP host, and Node would check `localhost` instead). With
 * several hosts, a certificate for any one of them is accepted.
 *
 * @example
 * ```ts
 * postgres(url, { ssl: databaseSsl({ mode: 'verify-full', caFile: '/etc/ssl/pg-ca.pem' }, urlHosts(url)) });
 * ```
 */
export function databaseSsl(
  tls: DatabaseTls | undefined,
  hosts: readonly string[] = [],
): false | ConnectionOptions {
  if (tls === undefined || tls.mode === 'disable') return false;
  return {
    rejectUnauthorized: tls.mode === 'verify-full',
    ...(tls.mode === 'verify-full' && hosts.length > 0
      ? { checkServerIdentity: identityOf(hosts) }
      : {}),
    ...(tls.caFile === undefined ? {} : { ca: read(tls.caFile, 'CA file') }),
    ...(tls.certFile === undefined ? {} : { cert: read(tls.certFile, 'certificate file') }),
    ...(tls.keyFile === undefined ? {} : { key: read(tls.keyFile, 'key file') }),
  };
}
