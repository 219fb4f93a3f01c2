import { createRuntime } from '../../actors/Runtime.ts';
import { startDashboard } from '../../dashboard/startDashboard.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { timingFromEnv, untilSignal } from '../runtimeFromEnv.ts';

/**
 * `opstate dashboard [--port N] [--host H] [--allow-actions]`: the operator's web dashboard on the
 * control plane's database (`DATABASE_URL`, heartbeats from `NATS_URL`), read-only unless
 * `--allow-actions`. It applies no migrations.
 *
 * @example
 * ```ts
 * process.exitCode = await dashboardCommand.run(['--port', '8090'], processIo);
 * ```
 */
export const dashboardCommand: Command = {
  name: 'dashboard',
  summary:
    'Serve the web dashboard: counts, the attention list, operations, live (read-only by default)',
  usage:
    'opstate dashboard [--port N (default 8090)] [--host ADDRESS (default 127.0.0.1)] [--allow-actions]',
  async run(args, io) {
    const { values, positionals } = parseFlags(args, {
      port: { type: 'string' },
      host: { type: 'string' },
      'allow-actions': { type: 'boolean' },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    const port = Number(values.port ?? '8090');
    if (!Number.isInteger(port) || port < 0 || port > 65_535) {
      throw new UsageError(`--port must be a port number, got '${values.port}'`);
    }
    const runtime = await createRuntime({ timing: timingFromEnv(), migrate: false });
    try {
      const inProcess = runtime.mode.transport === 'in-process';
      const dashboard = await startDashboard({
        database: runtime.database,
        timing: runtime.timing,
        // An in-process transport's heartbeats live in the process that runs the workers.
        heartbeats: inProcess ? null : runtime.transport.heartbeats,
        command: values['allow-actions'] === true ? runtime.command : null,
        port,
        ...(values.host === undefined ? {} : { host: values.host }),
        logger: runtime.logger,
      });
      io.out(
        `dashboard at ${dashboard.url} (${runtime.mode.database}; ${values['allow-actions'] === true ? 'operator actions enabled' : 'read-only'}${inProcess ? '; heartbeats not visible: in-process transport' : ''})`,
      );
      const signal = await untilSignal();
      io.out(`${signal}: stopping the dashboard`);
      await dashboard.close();
      return 0;
    } finally {
      await runtime.close();
    }
  },
};
