import { formatDeadline } from '../../machines/deadlines.ts';
import { loadConfiguration, redactConfiguration, SETTINGS } from '../../runtime/Configuration.ts';
import { resolveRuntimeTiming } from '../../runtime/Runtime.ts';
import { redactUrlList } from '../../transport/jetstream/natsCredentials.ts';
import { defineCommand, optionsOf } from '../Command.ts';
import { databaseInUse, transportInUse } from '../serversInUse.ts';

const SUMMARY = 'Show the resolved configuration (environment and flags), secrets redacted';

/**
 * `opstate config [--json]`: the configuration this process would run with, resolved from the
 * environment and validated, every secret shown as `***`. A bad value exits 2 naming the variable
 * and what it allows.
 *
 * @example
 * ```ts
 * await configCommand.run(['--json'], io);
 * ```
 */
export const configCommand = defineCommand('config', SUMMARY, (program, ctx) => {
  program
    .command('config')
    .description(SUMMARY)
    .option('--json', 'print the configuration as one JSON object')
    .option('--metrics-port <port>', 'as control-plane and worker take it')
    .action(
      ctx.action(async (cmd) => {
        const io = ctx.io;
        const values = optionsOf<{ json?: boolean; metricsPort?: string }>(cmd);
        const metricsPort = values.metricsPort;
        const config = loadConfiguration(
          process.env,
          metricsPort === undefined ? {} : { metricsPort },
        );
        // The timers' order is checked here as at start.
        const timing = resolveRuntimeTiming(config.timing, config.deadlines);
        if (values.json === true) {
          io.out(JSON.stringify({ ...redactConfiguration(config), resolvedTiming: timing }));
          return 0;
        }
        const width = Math.max(...SETTINGS.map((s) => s.variable.length));
        for (const s of SETTINGS) {
          const raw = process.env[s.variable];
          const shown =
            raw === undefined || raw === ''
              ? '(not set)'
              : s.secret
                ? '***'
                : s.variable.endsWith('_URL')
                  ? redactUrlList(raw)
                  : raw;
          io.out(`${s.variable.padEnd(width)}  ${shown}`);
        }
        const r = redactConfiguration(config);
        io.out('');
        io.out(`database   ${databaseInUse(config)}`);
        io.out(`transport  ${transportInUse(config)}`);
        io.out(`prefix     ${r.prefix}`);
        io.out(`log level  ${r.logLevel}`);
        io.out(`metrics    ${r.metricsPort === undefined ? 'off' : `port ${r.metricsPort}`}`);
        io.out(
          `timers     heartbeat ${timing.heartbeatIntervalMs} ms < timeout ${timing.heartbeatTimeoutMs} ms < reconciler floor ${timing.reconcilerFloorMs} ms < ack-wait ${timing.ackWaitMs} ms`,
        );
        io.out(
          `deadlines  ${Object.entries(timing.deadlines)
            .map(([kind, ms]) => `${kind} ${formatDeadline(ms)}`)
            .join(', ')} per attempt`,
        );
        return 0;
      }),
    );
});
