import { defineCommand, optionsOf } from '../Command.ts';
import { openProcessRuntime } from '../processRuntime.ts';
import { surviveStrayRejections, untilSignal } from '../runtimeFromEnv.ts';

const SUMMARY = 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand = defineCommand('control-plane', SUMMARY, (program, ctx) => {
  program
    .command('control-plane')
    .description(SUMMARY)
    .option('--metrics-port <port>', 'serve /metrics, /healthz and /readyz on this port (0: any)')
    .addHelpText(
      'after',
      [
        '',
        'Replicas share one expiring leadership lease in Postgres: the leader renews it every',
        'leaderPollMs (1 s) and a standby takes it over once it lapses (leaderLeaseMs, 10 s), so a',
        'dead or frozen leader is replaced within the lease plus one poll. `opstate status` shows',
        'who leads since when. Starts without the database or the broker: it waits for them and',
        'retries with capped backoff, and exits only on a configuration error.',
      ].join('\n'),
    )
    .action(
      ctx.action(async (cmd) => {
        const { metricsPort } = optionsOf<{ metricsPort?: string }>(cmd);
        const proc = await openProcessRuntime('control-plane', { metricsPort });
        surviveStrayRejections(proc.logger);
        const { runtime } = proc;
        const plane = runtime.startControlPlane();
        const server = await proc.serve({ plane });
        ctx.io.out(
          `control plane started (${runtime.mode.database}, ${runtime.mode.transport}) as ${plane.holder}; waiting for leadership${server === undefined ? '' : `; metrics on port ${server.port}`}`,
        );
        const signal = await untilSignal();
        ctx.io.out(`${signal}: stopping (leader: ${plane.isLeader})`);
        await proc.close();
        return 0;
      }),
    );
});
