import { consoleLogger } from '../../actors/Logger.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { runtimeFromEnv, surviveStrayRejections, untilSignal } from '../runtimeFromEnv.ts';
import { INSPECT_FLAGS, INSPECT_USAGE, openStatelyStream } from '../statelyInspection.ts';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand: Command = {
  name: 'control-plane',
  summary: 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM',
  usage: `opstate control-plane [--inspect ${INSPECT_USAGE}]`,
  help: [
    '',
    'Replicas share one expiring leadership lease in Postgres: the leader renews it every',
    'leaderPollMs (1 s) and a standby takes it over once it lapses (leaderLeaseMs, 10 s), so a',
    'dead or frozen leader is replaced within the lease plus one poll. `opstate status` shows',
    'who leads since when. Starts without the database or the broker: it waits for them and',
    'retries with capped backoff, and exits only on a configuration error.',
    '',
    '--inspect streams every operation’s transitions, live, to the Stately inspector (any',
    'replica may, leader or not): open the page it prints.',
  ],
  async run(args, io) {
    const { values, positionals } = parseFlags(args, {
      inspect: { type: 'boolean' },
      ...INSPECT_FLAGS,
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    if (values.inspect !== true && (values['inspect-port'] ?? values['inspect-url'])) {
      throw new UsageError('--inspect-port and --inspect-url go with --inspect');
    }
    surviveStrayRejections();
    // --inspect: every operation's transitions, live, in the Stately inspector.
    const inspection =
      values.inspect === true ? await openStatelyStream(values, io, consoleLogger) : null;
    const runtime = await runtimeFromEnv({ waitForServers: true }).catch(async (err: unknown) => {
      await inspection?.stop();
      throw err;
    });
    inspection?.follow(runtime.database);
    const plane = runtime.startControlPlane();
    io.out(
      `control plane started (${runtime.mode.database}, ${runtime.mode.transport}) as ${plane.holder}; waiting for leadership`,
    );
    const signal = await untilSignal();
    io.out(`${signal}: stopping (leader: ${plane.isLeader})`);
    await inspection?.stop();
    await runtime.close();
    return 0;
  },
};
