import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { systemClock, type TimerHandle } from '../machines/Clock.ts';
import type { Logger } from '../observe/Logger.ts';
import type { ControlPlane, Runtime } from './Runtime.ts';

/** What `/readyz` answers: each dependency's check, and for a control plane whether it leads. */
export interface Readiness {
  readonly ready: boolean;
  /** Why it is not ready, in a few words (`waiting for Postgres`, `NATS does not answer`). */
  readonly reason?: string;
  readonly checks: Record<string, { readonly ok: boolean; readonly error?: string }>;
  readonly leader?: boolean;
}

export interface MetricsServerOptions {
  /** 0 picks a free port (see `port` on the result). */
  readonly port: number;
  /** The address to listen on [127.0.0.1]; 0.0.0.0 for every interface (a container). */
  readonly host?: string;
  readonly registry: Registry;
  readonly readiness: () => Promise<Readiness>;
  readonly logger?: Logger;
}

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: TimerHandle;
  return Promise.race([
    work,
    new Promise<T>((_, reject) => {
      timer = systemClock.setTimeout(
        () => reject(new Error(`${what} did not answer within ${ms} ms`)),
        ms,
      );
    }),
  ]).finally(() => systemClock.clearTimeout(timer));
}

async function check(what: string, probe: () => Promise<unknown>) {
  try {
    await within(2_000, what, probe());
    return { ok: true };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Readiness of a runtime: Postgres answers a query and NATS a round trip (the in-process
 * transport always answers); with a control plane, whether it leads (a follower is ready: it
 * stands by).
 *
 * @example
 * ```ts
 * const readiness = readinessOf(runtime, runtime.startControlPlane());
 * ```
 */
export function readinessOf(runtime: Runtime, plane?: ControlPlane): () => Promise<Readiness> {
  return async () => {
    const transport = runtime.transport as { connection?: { rtt(): Promise<number> } };
    const [database, nats] = await Promise.all([
      check('Postgres', () => runtime.database.execute('select 1')),
      check('NATS', async () => transport.connection?.rtt()),
    ]);
    const reason = !database.ok
      ? 'Postgres does not answer'
      : !nats.ok
        ? 'NATS does not answer'
        : undefined;
    return {
      ready: reason === undefined,
      ...(reason === undefined ? {} : { reason }),
      checks: { database, nats },
      ...(plane === undefined ? {} : { leader: plane.isLeader }),
    };
  };
}

/**
 * Serves `/metrics` (Prometheus text), `/healthz` (the process answers) and `/readyz` (200 when
 * every dependency answers, else 503; JSON body with each check) on a port of its own.
 *
 * @example
 * ```ts
 * const server = await startMetricsServer({ port: 9464, registry: metrics.registry,
 *   readiness: readinessOf(runtime) });
 * ```
 */
export function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = async () => {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
      } else if (path === '/metrics') {
        const body = await options.registry.metrics();
        res.writeHead(200, { 'content-type': options.registry.contentType }).end(body);
      } else if (path === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}\n');
      } else if (path === '/readyz') {
        const report = await options.readiness();
        res
          .writeHead(report.ready ? 200 : 503, { 'content-type': 'application/json' })
          .end(`${JSON.stringify(report)}\n`);
      } else {
        res
          .writeHead(404, { 'content-type': 'text/plain' })
          .end('try /metrics, /healthz or /readyz\n');
      }
    };
    answer().catch((err: unknown) => {
      options.logger?.log('WARNING', 'metrics endpoint failed', {
        path,
        err,
      });
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
