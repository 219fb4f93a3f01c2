import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

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
 * postgres.js's `ssl` option for the settings: `false` for `disable` (a `sslmode` in the URL still
 * applies), else TLS options with the files read here.
 *
 * @example
 * ```ts
 * postgres(url, { ssl: databaseSsl({ mode: 'verify-full', caFile: '/etc/ssl/pg-ca.pem' }) });
 * ```
 */
export function databaseSsl(tls: DatabaseTls | undefined): false | ConnectionOptions {
  if (tls === undefined || tls.mode === 'disable') return false;
  return {
    rejectUnauthorized: tls.mode === 'verify-full',
    ...(tls.caFile === undefined ? {} : { ca: read(tls.caFile, 'CA file') }),
    ...(tls.certFile === undefined ? {} : { cert: read(tls.certFile, 'certificate file') }),
    ...(tls.keyFile === undefined ? {} : { key: read(tls.keyFile, 'key file') }),
  };
}
