import { loadConfiguration } from '../actors/Configuration.ts';
import type { Logger } from '../actors/Logger.ts';
import { createMetrics, type Metrics } from '../actors/Metrics.ts';
import { type MetricsServer, readinessOf, startMetricsServer } from '../actors/metricsServer.ts';
import { type ControlPlane, createRuntime, type Runtime } from '../actors/Runtime.ts';
import type { Worker } from '../actors/Worker.ts';
import { loggerOf, runtimeOptionsOf } from './runtimeFromEnv.ts';

/** A long-running opstate process: its runtime, logger, and metrics when a port is configured. */
export interface ProcessRuntime {
  readonly runtime: Runtime;
  readonly logger: Logger;
  /** Serves `/metrics`, `/healthz`, `/readyz` for the control plane or worker (once per process). */
  serve(part: { plane: ControlPlane } | { worker: Worker }): Promise<MetricsServer | undefined>;
  close(): Promise<void>;
}

/**
 * Opens the runtime of a `control-plane` or `worker` process from the configuration
 * (environment, `--metrics-port`), with a pino logger naming the role and, when a metrics port is
 * set, prom-client metrics fed by the runtime's observer.
 *
 * @example
 * ```ts
 * const proc = await openProcessRuntime('worker', { metricsPort: '9464' });
 * await proc.serve({ worker: proc.runtime.startWorker({ … }) });
 * ```
 */
export async function openProcessRuntime(
  role: 'control-plane' | 'worker',
  flags: { metricsPort?: string | undefined },
): Promise<ProcessRuntime> {
  const config = loadConfiguration(
    process.env,
    flags.metricsPort === undefined ? {} : { metricsPort: flags.metricsPort },
  );
  const logger = loggerOf(config, role);
  const metrics: Metrics | undefined =
    config.metricsPort === undefined ? undefined : createMetrics(logger);
  const runtime = await createRuntime(
    // A worker creates nothing on NATS (its credentials may not allow it): the control plane does.
    runtimeOptionsOf(config, {
      logger,
      observer: metrics?.observer,
      ensureTransport: role !== 'worker' || config.nats.url === undefined,
      waitForServers: true,
    }),
  );
  let server: MetricsServer | undefined;
  return {
    runtime,
    logger,
    async serve(part) {
      if (metrics === undefined || config.metricsPort === undefined) return undefined;
      const plane = 'plane' in part ? part.plane : undefined;
      if (plane !== undefined) {
        metrics.watchDeployment(runtime);
        metrics.watchControlPlane(plane);
      } else if ('worker' in part) {
        metrics.watchWorker(part.worker);
      }
      server = await startMetricsServer({
        port: config.metricsPort,
        registry: metrics.registry,
        readiness: readinessOf(runtime, plane),
        logger,
      });
      logger.log('INFO', 'metrics served', {
        port: server.port,
        paths: ['/metrics', '/healthz', '/readyz'],
      });
      return server;
    },
    async close() {
      await server?.close();
      await runtime.close();
    },
  };
}
