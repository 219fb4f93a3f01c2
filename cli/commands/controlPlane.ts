import { createPinoLogger } from '../../observe/pinoLogger.ts';
import { loadConfiguration } from '../../runtime/Configuration.ts';
import { defineCommand, optionsOf } from '../Command.ts';
import { loadPipeline } from '../loadPipeline.ts';
import { openProcessRuntime, requireTransport } from '../processRuntime.ts';
import { surviveStrayRejections, untilSignal } from '../runtimeFromEnv.ts';
import { withServiceOptions } from '../serviceOptions.ts';
import {
  openStatelyStream,
  requestedInspection,
  withInspectOptions,
} from '../statelyInspection.ts';

const SUMMARY = 'Run the control plane (one leader among replicas) until SIGINT/SIGTERM';

/** `opstate control-plane`: contends for leadership and runs scheduler, relay, monitor, reconciler. */
export const controlPlaneCommand = defineCommand('control-plane', SUMMARY, (program, ctx) => {
  withInspectOptions(
    withServiceOptions(program.command('control-plane').description(SUMMARY))
      .option(
        '--pipeline <module>',
        "run this pipeline: a .js/.mjs module exporting definePipeline's result as 'pipeline' or default",
      )
      .option('--inspect', "stream every operation's transitions, live, to the Stately inspector")
      .option(
        '--in-process',
        'run without NATS_URL, on the in-process transport: it dispatches to no other process',
      ),
  )
    .addHelpText(
      'after',
      [
        '',
        'Replicas share one expiring leadership lease in Postgres: the leader renews it every',
        'leaderPollMs (1 s) and a standby takes it over once it lapses (leaderLeaseMs, 10 s), so a',
        'dead or frozen leader is replaced within the lease plus one poll. `opstate status` shows',
        'who leads since when. Starts without the database or the broker: it waits for them and',
        'retries with capped backoff, and exits only on a configuration error. Without NATS_URL',
        'it refuses to start unless --in-process.',
        '',
        '--pipeline <module> runs a declared pipeline while this replica leads: each completed',
        'stage creates the next (docs/pipeline.md). Its locations must be registered.',
        '',
        '--inspect streams every operation’s transitions, live, to the Stately inspector (any',
        'replica may, leader or not): open the page it prints.',
      ].join('\n'),
    )
    .action(
      ctx.action(async (cmd) => {
        const o = optionsOf<{
          metricsPort?: string;
          metricsHost?: string;
          insecureNats?: boolean;
          inspect?: boolean;
          inspectPort?: string;
          inspectUrl?: string;
          inProcess?: boolean;
          pipeline?: string;
        }>(cmd);
        // Loaded and checked before anything opens: a bad module is the one line printed.
        const pipeline = o.pipeline === undefined ? undefined : await loadPipeline(o.pipeline);
        // --inspect: every operation's transitions, live, in the Stately inspector.
        const target = requestedInspection(o);
        // Refused before the relay opens, so that a refusal is the one line printed.
        requireTransport('control-plane', loadConfiguration(), o.inProcess === true);
        const inspection =
          target === undefined ? null : await openStatelyStream(target, ctx.io, createPinoLogger());
        const proc = await openProcessRuntime('control-plane', {
          metricsPort: o.metricsPort,
          metricsHost: o.metricsHost,
          insecureNats: o.insecureNats,
          inProcess: o.inProcess,
          io: ctx.io,
          pipeline,
        }).catch(async (err: unknown) => {
          await inspection?.stop();
          throw err;
        });
        surviveStrayRejections(proc.logger);
        const { runtime } = proc;
        inspection?.follow(runtime.database);
        const plane = runtime.startControlPlane();
        proc.serve({ plane });
        const { server } = proc;
        // Listening for SIGINT/SIGTERM before the ready line: a supervisor may signal as soon as it reads it.
        const stopping = untilSignal();
        ctx.io.out(
          `control plane started (${runtime.mode.database}, ${runtime.mode.transport}) as ${plane.holder}; waiting for leadership${server === undefined ? '' : `; metrics on port ${server.port}`}`,
        );
        const signal = await stopping;
        ctx.io.out(`${signal}: stopping (leader: ${plane.isLeader})`);
        await inspection?.stop();
        await proc.close();
        return 0;
      }),
    );
});
