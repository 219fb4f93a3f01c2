import { type Command, parseFlags, UsageError } from '../Command.ts';
import { openProcessRuntime } from '../processRuntime.ts';
import { untilSignal } from '../runtimeFromEnv.ts';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand: Command = {
  name: 'control-plane',
  summary: 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM',
  usage: 'opstate control-plane [--metrics-port PORT]',
  async run(args, io) {
    const { values, positionals } = parseFlags(args, { 'metrics-port': { type: 'string' } });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    const proc = await openProcessRuntime('control-plane', {
      metricsPort: values['metrics-port'],
    });
    const { runtime } = proc;
    const plane = runtime.startControlPlane();
    const server = await proc.serve({ plane });
    io.out(
      `control plane started (${runtime.mode.database}, ${runtime.mode.transport}); waiting for leadership${server === undefined ? '' : `; metrics on port ${server.port}`}`,
    );
    const signal = await untilSignal();
    io.out(`${signal}: stopping (leader: ${plane.isLeader})`);
    await proc.close();
    return 0;
  },
};
