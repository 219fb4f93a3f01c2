import { resolve } from 'node:path';
import { classifyFailure } from '../machines/classifyFailure.ts';
import type { Logger } from '../observe/Logger.ts';
import { createPinoLogger } from '../observe/pinoLogger.ts';
import type { RuntimeObserver } from '../observe/RuntimeObserver.ts';
import { migrate } from '../persistence/migrate.ts';
import { describeMove } from '../persistence/moveFromPublic.ts';
import { type Database, holdsEmbeddedDatabase, openDatabase } from '../persistence/openDatabase.ts';
import {
  type Configuration,
  databaseOptionsOf,
  loadConfiguration,
  secretsOf,
} from '../runtime/Configuration.ts';
import type { RuntimeOptions } from '../runtime/Runtime.ts';
import { CommandFailure, type Io } from './Command.ts';
import { serversInUse } from './serversInUse.ts';

export { secretsOf };

/**
 * The logger of an opstate process: pino JSON lines on stderr at the configured level, with the
 * configuration's secrets kept out. `role` goes on every line.
 */
export function loggerOf(config: Configuration, role?: string): Logger {
  return createPinoLogger({
    level: config.logLevel,
    secrets: secretsOf(config),
    ...(role === undefined ? {} : { base: { role } }),
  });
}

/** The runtime options a configuration says, with the process's logger and an observer. */
export function runtimeOptionsOf(
  config: Configuration,
  extra: {
    logger?: Logger;
    observer?: RuntimeObserver | undefined;
    ensureTransport?: boolean;
    /** Long-running processes start while Postgres or NATS is down and wait for them. */
    waitForServers?: boolean;
    /** Told what start waits for (readiness of a process served from the start). */
    onWaiting?: RuntimeOptions['onWaiting'];
    /** The pipeline a control plane runs (`--pipeline`). */
    pipeline?: RuntimeOptions['pipeline'];
    /** The reply subjects' prefix of the process's role (`inboxPrefixOf`). */
    natsInboxPrefix?: string;
  } = {},
): RuntimeOptions {
  return {
    ...(extra.waitForServers === undefined ? {} : { waitForServers: extra.waitForServers }),
    ...(extra.onWaiting === undefined ? {} : { onWaiting: extra.onWaiting }),
    ...(extra.ensureTransport === undefined ? {} : { ensureTransport: extra.ensureTransport }),
    ...(config.database.url === undefined ? {} : { databaseUrl: config.database.url }),
    dataDir: config.database.dataDir,
    ...(config.database.engine === undefined ? {} : { embeddedEngine: config.database.engine }),
    databaseTls: { mode: config.database.tls, ...config.database.tlsFiles },
    ...(config.nats.url === undefined ? {} : { natsUrl: config.nats.url }),
    natsCredentials: {
      auth: config.nats.auth,
      ...(config.nats.tls === undefined ? {} : { tls: config.nats.tls }),
    },
    insecureNats: config.nats.insecure,
    ...(extra.natsInboxPrefix === undefined ? {} : { natsInboxPrefix: extra.natsInboxPrefix }),
    prefix: config.prefix,
    timing: config.timing,
    deadlines: config.deadlines,
    logger: extra.logger ?? loggerOf(config),
    ...(extra.observer === undefined ? {} : { observer: extra.observer }),
    ...(extra.pipeline === undefined ? {} : { pipeline: extra.pipeline }),
  };
}

/** How a command uses the database it opens. */
export interface DatabaseUse {
  /** Where the line saying which database it opens goes (stderr: `--json` stdout stays clean). */
  readonly io?: Io;
  /**
   * Whether the command may create the embedded database (a write that sets a deployment up:
   * `location add`, `submit`, `migrate`). A read, or an operator command on operations that must
   * already exist, never does: with no `DATABASE_URL` and no embedded database it fails instead.
   */
  readonly creates?: boolean;
}

/** What a command opens its database with (injected in tests). */
export type DatabaseOpener = (use?: DatabaseUse) => Promise<Database>;

/**
 * Refuses, with the one line saying what to set, a command that would create the embedded
 * database although it only reads (or acts on what must already be there): no `DATABASE_URL`,
 * and the data folder holds no embedded database.
 *
 * @example
 * ```ts
 * requireExistingDatabase(loadConfiguration()); // throws CommandFailure on a fresh machine
 * ```
 */
export function requireExistingDatabase(config: Configuration): void {
  const { url, dataDir } = config.database;
  if (url !== undefined || dataDir.startsWith('memory://') || holdsEmbeddedDatabase(dataDir)) {
    return;
  }
  throw new CommandFailure(
    `no database to read: DATABASE_URL is not set and ${resolve(dataDir)} holds no embedded database; set DATABASE_URL=postgres://user:password@host:port/db, or OPSTATE_DATA_DIR to the folder of an embedded one`,
  );
}

/**
 * The database alone (for commands that need no transport), from the same configuration, after
 * saying on `use.io` which it is. The embedded database is migrated on open, as the embedded
 * runtime is; a server's is migrated by `opstate migrate`. Unless `use.creates`, an embedded
 * database that does not exist yet is refused rather than created.
 *
 * @example
 * ```ts
 * const database = await databaseFromEnv({ io: ctx.io });
 * ```
 */
export async function databaseFromEnv(use: DatabaseUse = {}): Promise<Database> {
  const config = loadConfiguration();
  if (use.creates !== true) requireExistingDatabase(config);
  use.io?.err(serversInUse(config, { transport: false }));
  const database = await openDatabase(databaseOptionsOf(config));
  if (config.database.url === undefined) {
    try {
      const { moved } = await migrate(database);
      // An embedded folder of an older version, moved on open: said once, on stderr.
      if (moved !== undefined) {
        if (use.io) use.io.err(describeMove(moved));
        else console.error(describeMove(moved));
      }
    } catch (err) {
      await database.close();
      throw err;
    }
  }
  return database;
}

/** Resolves on the first SIGINT or SIGTERM. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

/**
 * Keeps a long-running process up when a connection error surfaces outside any request (a
 * socket reset between queries, a driver callback after a restart): it is logged — an outage as a
 * WARNING, anything else as an ERROR naming it a bug — instead of crashing the process. The
 * runtime recovers connections on its own.
 */
export function surviveStrayRejections(logger: Logger = createPinoLogger()): void {
  process.on('unhandledRejection', (reason) => {
    const outage = classifyFailure(reason) === 'outage';
    logger.log(
      outage ? 'WARNING' : 'ERROR',
      outage
        ? 'connection error outside any request; the runtime reconnects on its own'
        : 'unhandled rejection (a bug; please report it); the process keeps running',
      { err: reason },
    );
  });
}
