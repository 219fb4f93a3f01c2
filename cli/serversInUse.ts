import { resolve } from 'node:path';
import { embeddedEngine } from '../persistence/openDatabase.ts';
import { type Configuration, redactConfiguration } from '../runtime/Configuration.ts';

/**
 * The database a configuration opens, as an operator reads it, with no secret: the URL (its
 * password as `***`) and TLS, or the embedded engine and the folder it lives in.
 *
 * @example
 * ```ts
 * databaseInUse(loadConfiguration()); // 'embedded Postgres server in /srv/app/.opstate'
 * ```
 */
export function databaseInUse(config: Configuration): string {
  const { database } = redactConfiguration(config);
  if (database.url !== undefined) {
    return `${database.url}${database.tls === 'disable' ? '' : ` (TLS ${database.tls})`}`;
  }
  if (database.dataDir.startsWith('memory://')) return 'embedded PGlite in memory';
  const engine = embeddedEngine(database.dataDir, database.engine);
  return `embedded ${engine === 'pglite' ? 'PGlite' : 'Postgres server'} in ${resolve(database.dataDir)}`;
}

/**
 * The transport a configuration opens: the NATS servers (secrets as `***`) with their
 * authentication, or the in-process transport, which only this process sees.
 *
 * @example
 * ```ts
 * transportInUse(loadConfiguration()); // 'nats://n1:4222,nats://n2:4222 (auth creds, TLS)'
 * ```
 */
export function transportInUse(config: Configuration): string {
  const { nats } = redactConfiguration(config);
  if (nats.url === undefined) return 'in-process (this process only)';
  return `${nats.url} (auth ${nats.auth.type}${nats.tls === undefined ? '' : ', TLS'})`;
}

/**
 * The line every command that opens a server prints on stderr before it does: which database,
 * and which transport (or none, for a command that needs only the database).
 *
 * @example
 * ```ts
 * io.err(serversInUse(config, { transport: false }));
 * // opstate: database postgres://app:***@db:5432/app; no transport (needs only the database)
 * ```
 */
export function serversInUse(config: Configuration, uses: { transport: boolean }): string {
  const transport = uses.transport
    ? `transport ${transportInUse(config)}`
    : 'no transport (needs only the database)';
  return `opstate: database ${databaseInUse(config)}; ${transport}`;
}
