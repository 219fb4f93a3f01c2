import { untilReachable } from '../loops/untilReachable.ts';
import type { Clock } from '../machines/Clock.ts';
import { allRoutes } from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import { migrate } from '../persistence/migrate.ts';
import { describeMove } from '../persistence/moveFromPublic.ts';
import { type Database, openDatabase } from '../persistence/openDatabase.ts';
import { createInProcessTransport } from '../transport/inprocess/createInProcessTransport.ts';
import { INSECURE_NATS_WARNING } from '../transport/jetstream/anonymousNats.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import type { Transport } from '../transport/Transport.ts';
import {
  type Configuration,
  type ConfigurationOverrides,
  databaseOptionsOf,
  loadConfiguration,
  natsCredentialsOf,
} from './Configuration.ts';
import type { RuntimeOptions } from './RuntimeOptions.ts';
import type { RuntimeTiming } from './RuntimeTiming.ts';

/**
 * The runtime's configuration: its options, and for every setting they leave unset the
 * environment (`options.env`, default `process.env`), through `loadConfiguration` as the CLI
 * resolves its own: a bad value is refused with `CONFIG` naming the variable or option and what
 * it allows.
 *
 * @example
 * ```ts
 * const config = configurationOf({ prefix: 'opstate' }); // NATS_URL etc. from the environment
 * ```
 */
export function configurationOf(options: RuntimeOptions): Configuration {
  const pick = <K extends keyof ConfigurationOverrides>(key: K) =>
    options[key] === undefined ? {} : { [key]: options[key] };
  return loadConfiguration(
    options.env ?? process.env,
    {},
    {
      ...pick('databaseUrl'),
      ...pick('dataDir'),
      ...pick('embeddedEngine'),
      ...pick('databaseSchema'),
      ...pick('databaseTls'),
      ...pick('natsUrl'),
      ...pick('natsCredentials'),
      ...pick('insecureNats'),
      ...pick('prefix'),
      ...pick('timing'),
      ...pick('deadlines'),
      ...pick('serviceName'),
      ...pick('embedded'),
    },
  );
}

/**
 * Opens the database (migrated unless told not to) and the transport (its stream and bucket
 * ensured unless told not to), as the configuration says, waiting for unreachable servers when
 * `waitForServers` says so (and telling `onWaiting` what it waits for, then that it waits no more).
 * Closes the database again when the transport cannot be opened.
 *
 * @example
 * ```ts
 * const config = configurationOf(options);
 * const { database, transport } = await openServers(options, { config, timing, logger, clock });
 * ```
 */
export async function openServers(
  options: RuntimeOptions,
  at: { config: Configuration; timing: RuntimeTiming; logger: Logger; clock: Clock },
): Promise<{ database: Database; transport: Transport }> {
  const { config, timing, logger, clock } = at;
  const { prefix } = config;
  const natsUrl = config.nats.url;
  const database = await openDatabase({
    ...databaseOptionsOf(config),
    ...(options.pglite === undefined ? {} : { pglite: options.pglite }),
  });
  const onWait = options.onWaiting;
  const reach = <T>(what: string, attempt: () => Promise<T>) =>
    options.waitForServers === true
      ? untilReachable(what, attempt, {
          logger,
          clock,
          ...(onWait === undefined ? {} : { onWait: (error: string) => onWait({ what, error }) }),
        })
      : attempt();
  try {
    if (options.migrate !== false) {
      const { moved } = await reach('Postgres', () => migrate(database));
      if (moved !== undefined) logger.log('INFO', describeMove(moved), { ...moved });
    }
    const transport =
      natsUrl === undefined
        ? createInProcessTransport({ timing, clock })
        : await reach('NATS', () =>
            createJetStreamTransport({
              servers: natsUrl,
              prefix,
              timing,
              credentials: natsCredentialsOf(config),
              insecureNats: config.nats.insecure,
              ...(options.natsObserver === true ? { observer: true } : {}),
              ...(options.natsInboxPrefix === undefined
                ? {}
                : { inboxPrefix: options.natsInboxPrefix }),
              ...(config.nats.dispatchMaxBytes === undefined
                ? {}
                : { maxStreamBytes: config.nats.dispatchMaxBytes }),
              ...(config.nats.queueMaxInFlight === undefined
                ? {}
                : { maxAckPending: config.nats.queueMaxInFlight }),
              ...(config.nats.replicas === undefined ? {} : { replicas: config.nats.replicas }),
            }).then((opened) => {
              if (opened.acceptsAnonymous)
                logger.log('WARNING', INSECURE_NATS_WARNING, { natsUrl });
              return opened;
            }),
          );
    if (options.ensureTransport ?? options.natsObserver !== true) {
      await reach('NATS JetStream', () => transport.ensure(allRoutes()));
    }
    onWait?.(undefined);
    return { database, transport };
  } catch (err) {
    await database.close().catch(() => undefined);
    throw err;
  }
}
