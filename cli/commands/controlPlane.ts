import { type Command, parseFlags, UsageError } from '../Command.ts';
import { runtimeFromEnv, untilSignal } from '../runtimeFromEnv.ts';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand: Command = {
  name: 'control-plane',
  summary: 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM',
  usage: 'opstate control-plane',
  async run(args, io) {
    const { positionals } = parseFlags(args, {});
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
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
