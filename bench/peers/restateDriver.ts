/**
 * The Restate side of the peers bench, run by bench/peers/restateRun.ts on Node 22 inside a
 * network namespace of its own with only loopback up (`unshare -n`): restate-server 1.7.12 tries
 * to reach an outside release feed at every start, with no setting that turns it off, so it never
 * runs where any other network is reachable — this process refuses to start it otherwise.
 *
 * Starts restate-server (a fresh base directory) and the service (bench/peers/restateService.ts,
 * a process of its own), registers the deployment through the admin API, drains
 * OPSTATE_BENCH_WARM_UP invocations untimed and OPSTATE_BENCH_PEERS_JOBS timed: wall clock from
 * the first ingress `send` (CREATE_BATCH concurrent sends at a time) to the moment a 20 ms poll of
 * the server's `sys_invocation_status` finds every invocation completed (polled once the service
 * has run that many handlers: each query costs the server milliseconds of CPU). Prints one JSON object:
 * the seconds, and the CPU of the server, the service and this process over the timed drain.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procCpuSeconds } from '../lib/cpu.ts';
import { envNumber, WARM_UP } from '../lib/settings.ts';
import { CREATE_BATCH, POLL_MS } from './Contender.ts';
import { assertLoopbackOnly } from './loopbackOnly.ts';

const JOBS = envNumber('OPSTATE_BENCH_PEERS_JOBS', 5000);
const ADMIN = 'http://127.0.0.1:9070';
const INGRESS = 'http://127.0.0.1:8080';
const SERVICE_PORT = 9080;
const DONE_TIMEOUT_MS = 180_000;
const require = createRequire(import.meta.url);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it resolves true; throws with `what` after `ms`. */
async function waitUntil(what: string, check: () => Promise<boolean>, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`restate: timed out waiting for ${what}`);
    await sleep(POLL_MS);
  }
}

function startProcesses(dir: string): { server: ChildProcess; service: ChildProcess } {
  const log = openSync(join(dir, 'restate.log'), 'a');
  const server = spawn(
    require.resolve('@restatedev/restate-server-linux-x64/bin/restate-server'),
    ['--base-dir', dir, '--no-logo'],
    {
      stdio: ['ignore', log, log],
      // Its defaults otherwise: telemetry off (unreachable here anyway), a log without colours.
      env: {
        ...process.env,
        RESTATE_DISABLE_TELEMETRY: 'true',
        RESTATE_LOG_DISABLE_ANSI_CODES: 'true',
      },
    },
  );
  const service = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./restateService.ts', import.meta.url))],
    {
      stdio: ['ignore', log, log, 'ipc'],
      env: {
        ...process.env,
        RESTATE_LOGGING: 'WARN',
        OPSTATE_BENCH_RESTATE_SERVICE_PORT: String(SERVICE_PORT),
      },
    },
  );
  return { server, service };
}

async function query(sql: string): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${ADMIN}/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: sql }),
  });
  if (!res.ok) throw new Error(`restate: query failed ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { rows: Record<string, unknown>[] }).rows;
}

async function register(): Promise<void> {
  await waitUntil('the admin API', async () => (await fetch(`${ADMIN}/health`)).ok);
  await waitUntil('the ingress', async () => (await fetch(`${INGRESS}/restate/health`)).ok);
  await waitUntil('the deployment to register', async () => {
    const res = await fetch(`${ADMIN}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri: `http://127.0.0.1:${SERVICE_PORT}`, force: true }),
    });
    return res.ok;
  });
  // The admin API answers before every partition is up; a query fails until they are.
  await waitUntil('the partitions to serve queries', async () => (await completedCount()) >= 0);
}

/** Invocations of peersNoop/run the server has completed so far. */
async function completedCount(): Promise<number> {
  const [row] = await query(
    `select count(*) as n from sys_invocation_status where target_service_name = 'peersNoop' and status = 'completed'`,
  );
  return Number(row?.n);
}

/** How many handler runs the service counted so far (asked over IPC). */
function handledCount(service: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    service.once('message', (m) => resolve(Number(m)));
    service.send('count');
  });
}

/**
 * Sends `n` invocations, CREATE_BATCH concurrent ones at a time; resolves once the server shows
 * all completed, with the seconds it took and how many queries of its table that needed (it is
 * asked only once the service has run as many handlers as it had run before plus `n`).
 */
async function drain(
  service: ChildProcess,
  n: number,
  before: { completed: number; handled: number },
): Promise<{ seconds: number; polls: number }> {
  const t0 = performance.now();
  for (let i = 0; i < n; i += CREATE_BATCH) {
    const size = Math.min(CREATE_BATCH, n - i);
    await Promise.all(
      Array.from({ length: size }, async () => {
        const res = await fetch(`${INGRESS}/peersNoop/run/send`, { method: 'POST' });
        if (!res.ok) throw new Error(`restate: send failed ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
      }),
    );
  }
  const deadline = Date.now() + DONE_TIMEOUT_MS;
  const late = () => {
    if (Date.now() > deadline)
      throw new Error('restate: invocations still running after the deadline');
  };
  while ((await handledCount(service)) < before.handled + n) {
    late();
    await sleep(POLL_MS);
  }
  let polls = 1;
  while ((await completedCount()) < before.completed + n) {
    polls++;
    late();
    await sleep(POLL_MS);
  }
  return { seconds: (performance.now() - t0) / 1000, polls };
}

/** restate-server's CPU milliseconds for one completion poll, as the drain's last ones cost. */
async function pollCostMs(server: ChildProcess): Promise<number> {
  const times = 50;
  const before = procCpuSeconds((pid) => pid === server.pid);
  for (let i = 0; i < times; i++) await completedCount();
  return ((procCpuSeconds((pid) => pid === server.pid) - before) / times) * 1e3;
}

/** Stops a child and waits for it to exit (SIGKILL after 10 s). */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** CPU seconds so far: this process, and each child by pid from /proc. */
function cpuNow(server: ChildProcess, service: ChildProcess) {
  const self = process.cpuUsage();
  return {
    driver: (self.user + self.system) / 1e6,
    server: procCpuSeconds((pid) => pid === server.pid),
    service: procCpuSeconds((pid) => pid === service.pid),
  };
}

async function main(): Promise<void> {
  assertLoopbackOnly();
  const dir = mkdtempSync(join(tmpdir(), 'opstate-peers-restate-'));
  const { server, service } = startProcesses(dir);
  try {
    await register();
    const counts = async () => ({
      completed: await completedCount(),
      handled: await handledCount(service),
    });
    await drain(service, WARM_UP, await counts());
    await sleep(1000);
    const countsBefore = await counts();
    const before = cpuNow(server, service);
    const { seconds, polls } = await drain(service, JOBS, countsBefore);
    const after = cpuNow(server, service);
    const ms = (s: number) => Math.round((s / JOBS) * 1e6) / 1e3;
    const result = {
      jobs: JOBS,
      seconds,
      node: process.versions.node,
      completion_polls: polls,
      restate_server_cpu_ms_per_poll: Math.round((await pollCostMs(server)) * 1e3) / 1e3,
      cpu_ms_per_invocation: {
        restate_server: ms(after.server - before.server),
        service: ms(after.service - before.service),
        driver: ms(after.driver - before.driver),
      },
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } catch (err) {
    const log = readFileSync(join(dir, 'restate.log'), 'utf8');
    process.stderr.write(`[restate] server and service log, last lines:\n${log.slice(-4000)}\n`);
    throw err;
  } finally {
    await Promise.all([stop(service), stop(server)]);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
