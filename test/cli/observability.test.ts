import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  archiveOperation,
  type Child,
  deploymentPerTest,
  HANDLERS,
  kill9,
  waitFor,
} from '../actors/harness.ts';

/**
 * A control plane and workers as processes, as an operator runs them: pino JSON lines on stderr,
 * Prometheus metrics and health endpoints on `--metrics-port`, and the database password they
 * were given nowhere in what they print.
 */
const deploy = deploymentPerTest();

const PASSWORD = `pw-${Math.random().toString(36).slice(2, 12)}`;

async function portOf(child: Child): Promise<number> {
  await waitFor(() => child.printed('metrics on port'), 'the process to serve metrics', 60_000);
  const line = child.output.find((l) => l.includes('metrics on port')) as string;
  return Number(/metrics on port (\d+)/.exec(line)?.[1]);
}

async function get(port: number, path: string) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

/** The value of one sample in Prometheus text, or undefined. */
function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m?.[1] !== name) continue;
    const have = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

function jsonLines(child: Child): Record<string, unknown>[] {
  return child.output.flatMap((l) => {
    try {
      const v = JSON.parse(l) as unknown;
      return typeof v === 'object' && v !== null ? [v as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}

describe('control plane and worker processes', () => {
  it('log JSON lines without the password, serve metrics and health, and count a recovery', async () => {
    const dep = await deploy();
    const url = new URL(dep.db.url);
    url.password = PASSWORD; // trust auth ignores it; every process is handed it all the same
    const env = { DATABASE_URL: url.toString(), OPSTATE_LOG_LEVEL: 'debug' };

    const plane = dep.spawnCli(['control-plane', '--metrics-port', '0'], env);
    const planePort = await portOf(plane);
    // The first worker holds the operation and is killed: the heartbeat monitor recovers it.
    const holder = await dep.readyWorker({ ...env, FIXTURE_HOLD_MS: '600000' });
    const { id } = await archiveOperation(dep);
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'IN_PROGRESS',
      'the first worker to start the operation',
      30_000,
    );
    // Killed after its first heartbeat, the heartbeat monitor is the path that recovers it.
    await waitFor(
      async () =>
        (await dep.runtime.transport.heartbeats.list()).some((h) =>
          h.held.some((o) => o.operationId === id),
        ),
      'the first worker to write a heartbeat',
    );
    await kill9(holder);
    const worker = dep.spawnCli(
      ['worker', '--kinds', 'all', '--handlers', HANDLERS, '--metrics-port', '0'],
      env,
    );
    const workerPort = await portOf(worker);
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
      'the recovered operation to complete on the second worker',
      60_000,
    );

    // Health and readiness.
    expect((await get(planePort, '/healthz')).status).toBe(200);
    await waitFor(
      async () => JSON.parse((await get(planePort, '/readyz')).body).leader === true,
      'the control plane to report leading',
    );
    const ready = await get(planePort, '/readyz');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toMatchObject({
      ready: true,
      checks: { database: { ok: true }, nats: { ok: true } },
    });
    const workerReady = await get(workerPort, '/readyz');
    expect(workerReady.status).toBe(200);
    expect(JSON.parse(workerReady.body)).not.toHaveProperty('leader');

    // The control plane's metrics: the deployment as stored, and what its loops did.
    const planeMetrics = (await get(planePort, '/metrics')).body;
    const kind = 'long_term_archive';
    expect(sample(planeMetrics, 'opstate_operations', { kind, status: 'COMPLETED' })).toBe(1);
    expect(sample(planeMetrics, 'opstate_operations', { kind, status: 'PENDING' })).toBe(0);
    expect(sample(planeMetrics, 'opstate_leader')).toBe(1);
    // The dispatch stays past the relay's cursor for the relay's grace, then is passed.
    await waitFor(
      async () => sample((await get(planePort, '/metrics')).body, 'opstate_outbox_depth') === 0,
      'the relay to pass the dispatch',
    );
    // No heartbeat covers a staging operation: no series, never a 0.
    expect(sample(planeMetrics, 'opstate_heartbeat_age_seconds', { kind: 'staging' })).toBe(
      undefined,
    );
    expect(
      sample(planeMetrics, 'opstate_transitions_total', {
        kind,
        event: 'SCHEDULE',
        by: 'scheduler',
      }),
    ).toBe(2);
    expect(
      sample(planeMetrics, 'opstate_recoveries_total', { kind, path: 'heartbeat_monitor' }),
    ).toBe(1);
    // Node's default metrics under their standard names, and the build.
    expect(sample(planeMetrics, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(planeMetrics).not.toContain('opstate_process_');
    expect(sample(planeMetrics, 'opstate_build_info', { node: process.version })).toBe(1);

    // The second worker's: its start, its completion, their latency and duration, nothing in flight.
    const workerMetrics = (await get(workerPort, '/metrics')).body;
    expect(
      sample(workerMetrics, 'opstate_transitions_total', { kind, event: 'START', by: 'worker' }),
    ).toBe(1);
    expect(
      sample(workerMetrics, 'opstate_transitions_total', { kind, event: 'COMPLETE', by: 'worker' }),
    ).toBe(1);
    expect(sample(workerMetrics, 'opstate_dispatch_to_start_seconds_count', { kind })).toBe(1);
    expect(
      sample(workerMetrics, 'opstate_handler_duration_seconds_count', {
        kind,
        outcome: 'completed',
      }),
    ).toBe(1);
    expect(sample(workerMetrics, 'opstate_in_flight')).toBe(0);

    // Logs: JSON lines, a debug line per transition, the recovery at warn with its path.
    const planeLines = jsonLines(plane);
    expect(
      planeLines.some(
        (l) => l.msg === 'operation transition' && l.operationId === id && l.event === 'SCHEDULE',
      ),
    ).toBe(true);
    const recovered = planeLines.find((l) => l.msg === 'operation recovered');
    expect(recovered).toMatchObject({
      level: 40,
      operationId: id,
      kind,
      attempt: 2,
      path: 'heartbeat_monitor',
      role: 'control-plane',
      hostname: hostname(),
    });
    expect(
      jsonLines(worker).some(
        (l) => l.msg === 'operation transition' && l.event === 'COMPLETE' && l.operationId === id,
      ),
    ).toBe(true);

    // `opstate config` shows the same configuration, redacted.
    const config = dep.spawnCli(['config', '--json'], env);
    expect(await config.exited).toBe(0);
    expect(config.output.join('\n')).toContain(':***@127.0.0.1');

    // Nothing any process printed holds the password.
    for (const child of dep.children) {
      expect(child.output.join('\n')).not.toContain(PASSWORD);
    }
  });
});
