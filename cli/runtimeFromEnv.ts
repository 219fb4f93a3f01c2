import {
  type Configuration,
  type ConfigurationFlags,
  databaseOptionsOf,
  loadConfiguration,
  secretsOf,
} from '../actors/Configuration.ts';
import type { Logger } from '../actors/Logger.ts';
import { createPinoLogger } from '../actors/pinoLogger.ts';
import {
  createRuntime,
  type Runtime,
  type RuntimeOptions,
  type RuntimeTiming,
} from '../actors/Runtime.ts';
import type { RuntimeObserver } from '../actors/RuntimeObserver.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import { migrate } from '../persistence/migrate.ts';
import { describeMove } from '../persistence/moveFromPublic.ts';
import { type Database, openDatabase } from '../persistence/openDatabase.ts';

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
    prefix: config.prefix,
    timing: config.timing,
    logger: extra.logger ?? loggerOf(config),
    ...(extra.observer === undefined ? {} : { observer: extra.observer }),
  };
}

/** Timer overrides from `OPSTATE_TIMING` (validated with the rest of the configuration). */
export function timingFromEnv(): Partial<RuntimeTiming> {
  return loadConfiguration().timing;
}

/**
 * The runtime the CLI runs on, from the one configuration (environment and flags; see
 * `opstate config`).
 */
export function runtimeFromEnv(
  options: {
    flags?: ConfigurationFlags;
    observer?: RuntimeObserver;
    logger?: Logger;
    waitForServers?: boolean;
  } = {},
): Promise<Runtime> {
  const config = loadConfiguration(process.env, options.flags);
  return createRuntime(runtimeOptionsOf(config, options));
}

/**
 * The database alone (for commands that need no transport), from the same configuration. The
 * embedded database is migrated on open, as the embedded runtime is; a server's is migrated by
 * `opstate migrate`.
 */
export async function databaseFromEnv(): Promise<Database> {
  const config = loadConfiguration();
  const database = await openDatabase(databaseOptionsOf(config));
  if (config.database.url === undefined) {
    try {
      const { moved } = await migrate(database);
      // An embedded folder of an older version, moved on open: said once, on stderr.
      if (moved !== undefined) process.stderr.write(`${describeMove(moved)}\n`);
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
      { error: reason instanceof Error ? reason.message : String(reason) },
    );
  });
}
