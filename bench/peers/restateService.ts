/**
 * The Restate deployment the peers bench invokes: one service, `peersNoop`, whose handler `run`
 * takes one no-op `ctx.run` step (journaled by the server like any step). Runs on Node 22 (the
 * SDK calls `Promise.withResolvers`), inside the bench's network namespace, started by
 * bench/peers/restateDriver.ts, with an IPC channel to it; listens on
 * OPSTATE_BENCH_RESTATE_SERVICE_PORT (HTTP/2).
 */
import * as restate from '@restatedev/restate-sdk';

const port = Number(process.env.OPSTATE_BENCH_RESTATE_SERVICE_PORT ?? 9080);
/**
 * Handler runs that got past their step (a replayed invocation counts again): the driver asks for
 * it over IPC and polls the server's own table only once it reaches the number sent, as each
 * query of that table costs the server a few milliseconds of CPU.
 */
let handled = 0;
process.on('message', () => process.send?.(handled));

const peersNoop = restate.service({
  name: 'peersNoop',
  handlers: {
    run: async (ctx: restate.Context): Promise<void> => {
      await ctx.run('noop', () => {});
      handled++;
    },
  },
});

await restate.serve({ services: [peersNoop], port });
process.stdout.write(`listening ${port}\n`);
