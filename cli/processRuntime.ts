import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Pipeline } from '../machines/pipeline.ts';
import type { Logger } from '../observe/Logger.ts';
import { scrubText } from '../observe/pinoLogger.ts';
import { type Configuration, loadConfiguration, secretsOf } from '../runtime/Configuration.ts';
import { createMetrics, type Metrics } from '../runtime/Metrics.ts';
import {
  type MetricsServer,
  type Readiness,
  readinessOf,
  startMetricsServer,
} from '../runtime/metricsServer.ts';
import { type ControlPlane, createRuntime, type Runtime } from '../runtime/Runtime.ts';
import type { StartupWait } from '../runtime/RuntimeOptions.ts';
import { inboxPrefixOf } from '../transport/jetstream/inboxPrefix.ts';
import { redactUrlList } from '../transport/jetstream/natsCredentials.ts';
import type { Worker } from '../worker/Worker.ts';
import type { Io } from './Command.ts';
import { portInUse } from './portInUse.ts';
import { loggerOf, runtimeOptionsOf } from './runtimeFromEnv.ts';
import { serversInUse } from './serversInUse.ts';

/** A long-running opstate process: its runtime, logger, and metrics when a port is configured. */
export interface ProcessRuntime {
  readonly runtime: Runtime;
  readonly logger: Logger;
  /** The metrics server, when a port is configured: serving since before the servers answered. */
  readonly server: MetricsServer | undefined;
  /** Watches the control plane or worker in metrics and readiness (once per process). */
  serve(part: { plane: ControlPlane } | { worker: Worker }): void;
  close(): Promise<void>;
}

/**
 * A worker or control plane with no `NATS_URL` would run on the in-process transport, where no
 * other process can reach it: refused unless `--in-process` says that is meant, and `--in-process`
 * beside a `NATS_URL` is refused as a contradiction. `openProcessRuntime` checks it; a command
 * that opens something before (the control plane's inspector relay) checks it first.
 *
 * @example
 * ```ts
 * requireTransport('control-plane', loadConfiguration(), o.inProcess === true);
 * ```
 */
export function requireTransport(role: string, config: Configuration, inProcess: boolean): void {
  if (inProcess && config.nats.url !== undefined) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `--in-process runs on the in-process transport, but NATS_URL is set (${redactUrlList(config.nats.url)}); unset NATS_URL or drop --in-process`,
    );
  }
  if (!inProcess && config.nats.url === undefined) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `NATS_URL is not set: a ${role} on the in-process transport never exchanges work with another process; set NATS_URL=nats://host:4222, or pass --in-process if this process alone is meant to see its work`,
    );
  }
}

/** What `/readyz` says before the runtime is open: what start waits for, and why. */
export function startingReadiness(waiting: StartupWait, role: string): Readiness {
  const reason =
    waiting === undefined ? 'starting: connecting to the servers' : `waiting for ${waiting.what}`;
  return {
    ready: false,
    reason,
    checks:
      waiting === undefined
        ? {}
        : {
            [waiting.what.startsWith('NATS') ? 'nats' : 'database']: {
              ok: false,
              error: waiting.error,
            },
          },
    ...(role === 'control-plane' ? { leader: false } : {}),
  };
}

/** A readiness report with every secret kept out of its errors, as out of the log. */
function scrubbed(report: Readiness, secrets: readonly string[]): Readiness {
  const checks = Object.fromEntries(
    Object.entries(report.checks).map(([name, c]) => [
      name,
      c.error === undefined ? c : { ...c, error: scrubText(c.error, secrets) },
    ]),
  );
  return { ...report, checks };
}

/**
 * Opens the runtime of a `control-plane` or `worker` process from the configuration
 * (environment, `--metrics-port`), after saying on `flags.io` which database and transport it
 * uses (with no `NATS_URL`, only when `--in-process` says so), with a pino logger naming the role and, when a metrics port is
 * set, prom-client metrics fed by the runtime's observer. The metrics server starts first: while
 * the process waits for Postgres or NATS, `/healthz` answers 200 and `/readyz` 503 with what it
 * waits for.
 *
 * @example
 * ```ts
 * const proc = await openProcessRuntime('worker', { metricsPort: '9464', io: ctx.io });
 * proc.serve({ worker: proc.runtime.startWorker({ … }) });
 * ```
 */
export async function openProcessRuntime(
  role: 'control-plane' | 'worker',
  flags: {
    metricsPort?: string | undefined;
    metricsHost?: string | undefined;
    /** `--insecure-nats`: run on a NATS that accepts clients without credentials. */
    insecureNats?: boolean | undefined;
    /** The worker's `--id`: its replies come on an inbox of its own. */
    workerId?: string | undefined;
    inProcess?: boolean | undefined;
    io?: Io;
    /** The pipeline the control plane runs (`--pipeline`). */
    pipeline?: Pipeline | undefined;
  },
): Promise<ProcessRuntime> {
  const config = loadConfiguration(process.env, {
    ...(flags.metricsPort === undefined ? {} : { metricsPort: flags.metricsPort }),
    ...(flags.metricsHost === undefined ? {} : { metricsHost: flags.metricsHost }),
    ...(flags.insecureNats === true ? { insecureNats: true } : {}),
  });
  requireTransport(role, config, flags.inProcess === true);
  flags.io?.err(serversInUse(config, { transport: true }));
  const logger = loggerOf(config, role);
  const metrics: Metrics | undefined =
    config.metricsPort === undefined ? undefined : createMetrics(logger);
  let waiting: StartupWait;
  let readiness: (() => Promise<Readiness>) | undefined;
  const metricsPort = config.metricsPort;
  const server =
    metrics === undefined || metricsPort === undefined
      ? undefined
      : await startMetricsServer({
          port: metricsPort,
          host: config.metricsHost,
          registry: metrics.registry,
          readiness: async () =>
            scrubbed(await (readiness?.() ?? startingReadiness(waiting, role)), secretsOf(config)),
          logger,
        }).catch((err: unknown) => {
          throw portInUse(err, {
            port: metricsPort,
            wanted: `the ${role}'s metrics (/metrics, /healthz, /readyz)`,
            fix: 'pass --metrics-port (or OPSTATE_METRICS_PORT) with another port, 0 for any free one',
          });
        });
  if (server !== undefined) {
    logger.log('INFO', 'metrics served', {
      host: config.metricsHost,
      port: server.port,
      paths: ['/metrics', '/healthz', '/readyz'],
    });
  }
  let runtime: Runtime;
  try {
    runtime = await createRuntime(
      // A worker creates nothing on NATS (its credentials may not allow it): the control plane does.
      runtimeOptionsOf(config, {
        logger,
        observer: metrics?.observer,
        ensureTransport: role !== 'worker' || config.nats.url === undefined,
        waitForServers: true,
        pipeline: flags.pipeline,
        natsInboxPrefix: inboxPrefixOf(config.prefix, role, flags.workerId),
        onWaiting: (w) => {
          waiting = w;
        },
      }),
    );
  } catch (err) {
    await server?.close();
    throw err;
  }
  readiness = readinessOf(runtime);
  return {
    runtime,
    logger,
    server,
    serve(part) {
      if (metrics === undefined) return;
      const plane = 'plane' in part ? part.plane : undefined;
      if (plane !== undefined) {
        metrics.watchDeployment(runtime);
        metrics.watchControlPlane(plane);
      } else if ('worker' in part) {
        metrics.watchWorker(part.worker);
      }
      readiness = readinessOf(runtime, plane);
    },
    async close() {
      await server?.close();
      await runtime.close();
    },
  };
}
