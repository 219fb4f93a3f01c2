import { InvalidArgumentError } from 'commander';
import { isLoopbackAddress, parseTokens } from '../../dashboard/requestGuard.ts';
import { startDashboard } from '../../dashboard/startDashboard.ts';
import { loadConfiguration, readSetting } from '../../runtime/Configuration.ts';
import { createRuntime } from '../../runtime/Runtime.ts';
import { inboxPrefixOf } from '../../transport/jetstream/inboxPrefix.ts';
import { defineCommand, optionsOf } from '../Command.ts';
import { portInUse } from '../portInUse.ts';
import { requireExistingDatabase, untilSignal } from '../runtimeFromEnv.ts';
import { serversInUse } from '../serversInUse.ts';
import { INSECURE_NATS_HELP } from '../serviceOptions.ts';

function portNumber(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535)
    throw new InvalidArgumentError('use a port number 0–65535');
  return port;
}

/** `--allowed-host` given more than once: each adds one. */
const collect = (value: string, previous: string[] = []) => [...previous, value];

/** What the dashboard is guarded by, from the flags and the environment. */
function guardOf(o: { host?: string; allowedHost?: string[]; operator?: string }) {
  const env = process.env;
  const operator = readSetting(env, 'OPSTATE_OPERATOR', o.operator);
  const hosts = [
    ...(readSetting(env, 'OPSTATE_DASHBOARD_ALLOWED_HOSTS')?.split(',') ?? []),
    ...(o.allowedHost ?? []).flatMap((h) => h.split(',')),
  ]
    .map((h) => h.trim())
    .filter((h) => h !== '');
  const tokenValue = readSetting(env, 'OPSTATE_DASHBOARD_TOKEN');
  return {
    ...(operator === undefined ? {} : { operator }),
    allowedHosts: hosts,
    ...(tokenValue === undefined
      ? {}
      : { tokens: parseTokens(tokenValue, operator ?? 'operator') }),
  };
}

/**
 * `opstate dashboard [--port N] [--host H] [--allow-actions] [--allowed-host NAME] [--operator NAME]`:
 * the operator's web dashboard on the control plane's database (`DATABASE_URL`, heartbeats from
 * `NATS_URL`), read-only unless `--allow-actions`. It answers only to its own host names (a
 * DNS-rebinding page is refused) and asks for a token (`OPSTATE_DASHBOARD_TOKEN`, else one it
 * makes and prints once) when actions are on at a non-loopback address. It applies no migrations.
 *
 * @example
 * ```ts
 * process.exitCode = await dashboardCommand.run(['--port', '8090'], processIo);
 * ```
 */
const SUMMARY =
  'Serve the web dashboard: counts, the attention list, operations, live (read-only by default)';

export const dashboardCommand = defineCommand('dashboard', SUMMARY, (program, ctx) => {
  program
    .command('dashboard')
    .description(SUMMARY)
    .option('--port <port>', 'the port to serve on', portNumber, 8090)
    .option('--host <address>', 'the address to listen on (default 127.0.0.1)')
    .option('--allow-actions', 'let the page retry, reset and cancel operations')
    .option(
      '--allowed-host <name>',
      'a host name to answer to besides the loopback names and --host (repeatable)',
      collect,
    )
    .option('--operator <name>', 'who actions are recorded as by when no token names them')
    .option('--insecure-nats', INSECURE_NATS_HELP)
    .action(
      ctx.action(async (cmd) => {
        const o = optionsOf<{
          port: number;
          host?: string;
          allowActions?: boolean;
          allowedHost?: string[];
          operator?: string;
          insecureNats?: boolean;
        }>(cmd);
        // A read: it opens what exists, says which, and never creates the embedded database.
        const config = loadConfiguration();
        const guard = guardOf(o);
        requireExistingDatabase(config);
        ctx.io.err(serversInUse(config, { transport: true }));
        const runtime = await createRuntime({
          timing: config.timing,
          deadlines: config.deadlines,
          migrate: false,
          ...(o.insecureNats === true ? { insecureNats: true } : {}),
          natsInboxPrefix: inboxPrefixOf(config.prefix, 'observer'),
          // It reads heartbeats and creates nothing on NATS (deploy/nats.conf's observer user).
          natsObserver: true,
        });
        try {
          const inProcess = runtime.mode.transport === 'in-process';
          const dashboard = await startDashboard({
            database: runtime.database,
            timing: runtime.timing,
            // An in-process transport's heartbeats live in the process that runs the workers.
            heartbeats: inProcess ? null : runtime.transport.heartbeats,
            command: o.allowActions === true ? runtime.command : null,
            port: o.port,
            ...(o.host === undefined ? {} : { host: o.host }),
            ...guard,
            logger: runtime.logger,
          }).catch((err: unknown) => {
            throw portInUse(err, {
              port: o.port,
              wanted: 'the dashboard',
              fix: 'pass --port with another port (0: any free one)',
            });
          });
          // Listening for SIGINT/SIGTERM before the ready line: a supervisor may signal as soon as it reads it.
          const stopping = untilSignal();
          if (dashboard.generatedToken !== undefined) {
            // Printed once, here: it is kept nowhere else.
            ctx.io.out(
              `operator actions at ${o.host} ask for a token; this one is made for this run (set OPSTATE_DASHBOARD_TOKEN to choose your own): ${dashboard.generatedToken}`,
            );
          } else if (o.allowActions === true && !isLoopbackAddress(o.host ?? '127.0.0.1')) {
            ctx.io.out(
              `operator actions at ${o.host} ask for a token from OPSTATE_DASHBOARD_TOKEN`,
            );
          }
          ctx.io.out(
            `dashboard at ${dashboard.url} (${runtime.mode.database}; ${o.allowActions === true ? 'operator actions enabled' : 'read-only'}${inProcess ? '; heartbeats not visible: in-process transport' : ''})`,
          );
          const signal = await stopping;
          ctx.io.out(`${signal}: stopping the dashboard`);
          await dashboard.close();
          return 0;
        } finally {
          await runtime.close();
        }
      }),
    );
});
