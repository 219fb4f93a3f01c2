import { type Command, parseFlags, UsageError } from '../Command.ts';
import { runtimeFromEnv, surviveStrayRejections, untilSignal } from '../runtimeFromEnv.ts';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand: Command = {
  name: 'control-plane',
  summary: 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM',
  usage: 'opstate control-plane',
  help: [
    '',
    'Replicas share one expiring leadership lease in Postgres: the leader renews it every',
    'leaderPollMs (1 s) and a standby takes it over once it lapses (leaderLeaseMs, 10 s), so a',
    'dead or frozen leader is replaced within the lease plus one poll. `opstate status` shows',
    'who leads since when. Starts without the database or the broker: it waits for them and',
    'retries with capped backoff, and exits only on a configuration error.',
  ],
  async run(args, io) {
    const { positionals } = parseFlags(args, {});
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    surviveStrayRejections();
    const runtime = await runtimeFromEnv({ waitForServers: true });
    const plane = runtime.startControlPlane();
    io.out(
      `control plane started (${runtime.mode.database}, ${runtime.mode.transport}) as ${plane.holder}; waiting for leadership`,
    );
    const signal = await untilSignal();
    io.out(`${signal}: stopping (leader: ${plane.isLeader})`);
    await runtime.close();
    return 0;
  },
};
