import { defineCommand, optionsOf } from '../Command.ts';
import { openProcessRuntime } from '../processRuntime.ts';
import { untilSignal } from '../runtimeFromEnv.ts';

const SUMMARY = 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand = defineCommand('control-plane', SUMMARY, (program, ctx) => {
  program
    .command('control-plane')
    .description(SUMMARY)
    .option('--metrics-port <port>', 'serve /metrics, /healthz and /readyz on this port (0: any)')
    .action(
      ctx.action(async (cmd) => {
        const { metricsPort } = optionsOf<{ metricsPort?: string }>(cmd);
        const proc = await openProcessRuntime('control-plane', { metricsPort });
        const { runtime } = proc;
        const plane = runtime.startControlPlane();
        const server = await proc.serve({ plane });
        ctx.io.out(
          `control plane started (${runtime.mode.database}, ${runtime.mode.transport}); waiting for leadership${server === undefined ? '' : `; metrics on port ${server.port}`}`,
        );
        const signal = await untilSignal();
        ctx.io.out(`${signal}: stopping (leader: ${plane.isLeader})`);
        await proc.close();
        return 0;
      }),
    );
});
