import type { Clock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { allRoutes } from '../machines/routing.ts';
import { missingDriverGuard } from '../persistence/driverPatch.ts';
import { migrate } from '../persistence/migrate.ts';
import { type Database, openDatabase } from '../persistence/openDatabase.ts';
import { createInProcessTransport } from '../transport/inprocess/createInProcessTransport.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import type { Transport } from '../transport/Transport.ts';
import type { Logger } from './Logger.ts';
import type { RuntimeOptions } from './Runtime.ts';
import type { RuntimeTiming } from './RuntimeTiming.ts';
import { untilReachable } from './untilReachable.ts';

function fromEnv(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
}

/**
 * The deployment's name on NATS and the broker's URL, checked; `CONFIG` when they clash.
 *
 * @example
 * ```ts
 * const { prefix, natsUrl } = deploymentOf({ prefix: 'opstate' }); // natsUrl from NATS_URL
 * ```
 */
export function deploymentOf(options: RuntimeOptions): {
  prefix: string;
  natsUrl: string | undefined;
} {
  const prefix = options.prefix ?? fromEnv('OPSTATE_PREFIX') ?? 'opstate';
  if (!/^[A-Za-z0-9_-]+$/.test(prefix)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `prefix '${prefix}' may hold only letters, digits, '-' and '_' (it names NATS subjects and streams)`,
    );
  }
  if (
    options.embedded === true &&
    (options.databaseUrl !== undefined || options.natsUrl !== undefined)
  ) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'embedded: true runs on the embedded database and the in-process transport; drop databaseUrl and natsUrl',
    );
  }
  const natsUrl = options.embedded === true ? undefined : (options.natsUrl ?? fromEnv('NATS_URL'));
  return { prefix, natsUrl };
}

/**
 * Opens the database (migrated unless told not to) and the transport (its stream and bucket
 * ensured unless told not to), waiting for unreachable servers when `waitForServers` says so.
 * Closes the database again when the transport cannot be opened.
 *
 * @example
 * ```ts
 * const { database, transport } = await openServers(options, { prefix, natsUrl, timing, logger, clock });
 * ```
 */
export async function openServers(
  options: RuntimeOptions,
  at: {
    prefix: string;
    natsUrl: string | undefined;
    timing: RuntimeTiming;
    logger: Logger;
    clock: Clock;
  },
): Promise<{ database: Database; transport: Transport }> {
  const { prefix, natsUrl, timing, logger, clock } = at;
  const database = await openDatabase({
    ...(options.databaseUrl === undefined ? {} : { databaseUrl: options.databaseUrl }),
    ...(options.databaseTls === undefined ? {} : { tls: options.databaseTls }),
    ...(options.pglite === undefined ? {} : { pglite: options.pglite }),
    ...(options.embeddedEngine === undefined ? {} : { engine: options.embeddedEngine }),
    ...(options.embedded === true
      ? { dataDir: options.dataDir ?? fromEnv('OPSTATE_DATA_DIR') ?? './.opstate', embedded: true }
      : options.dataDir === undefined
        ? {}
        : { dataDir: options.dataDir }),
  });
  if (database.dialect === 'postgres') {
    const problem = missingDriverGuard();
    if (problem !== undefined) logger.log('WARNING', problem);
  }
  const reach = <T>(what: string, attempt: () => Promise<T>) =>
    options.waitForServers === true ? untilReachable(what, attempt, { logger, clock }) : attempt();
  try {
    if (options.migrate !== false) await reach('Postgres', () => migrate(database));
    const transport =
      natsUrl === undefined
        ? createInProcessTransport({ timing, clock })
        : await reach('NATS', () =>
            createJetStreamTransport({
              servers: natsUrl,
              prefix,
              timing,
              ...(options.natsCredentials === undefined
                ? {}
                : { credentials: options.natsCredentials }),
            }),
          );
    if (options.ensureTransport !== false) {
      await reach('NATS JetStream', () => transport.ensure(allRoutes()));
    }
    return { database, transport };
  } catch (err) {
    await database.close().catch(() => undefined);
    throw err;
  }
}
