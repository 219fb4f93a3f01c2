import { type ChildProcess, spawn } from 'node:child_process';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { HANDLERS, NATS_URL } from '../actors/harness.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { PrivatePostgres } from '../helpers/privateServers.ts';
import { freePort, NatsServerProcess, uniquePrefix, waitFor } from '../transport/helpers.ts';

/**
 * A control plane and a worker started while Postgres and NATS are both down: their metrics port
 * answers from the start, `/readyz` says what they wait for (503), and turns 200 once the servers
 * come up, the control plane's saying it leads.
 */
let pg: PrivatePostgres | undefined;
/** A Postgres whose every connection slot the test holds. */
let crowded: PrivatePostgres | undefined;
let nats: NatsServerProcess | undefined;
const children: ChildProcess[] = [];
const output: string[] = [];
const PASSWORD = `pw-${Math.random().toString(36).slice(2, 12)}`;

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    }
  }
  await nats?.dispose();
  await pg?.dispose();
  await crowded?.dispose();
});

function spawnCli(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, opstateArgs(args), {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (b: Buffer) => output.push(b.toString()));
  child.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
  children.push(child);
  return child;
}

async function readyz(port: number): Promise<{ status: number; body: Record<string, unknown> }> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch {
    return { status: 0, body: {} };
  }
}

const said = (port: number, status: number, reason?: string) => async () => {
  const r = await readyz(port);
  return r.status === status && (reason === undefined || r.body.reason === reason);
};

describe('metrics from the start', () => {
  it('serves /healthz and a 503 /readyz naming what it waits for, then 200 once the servers are up', async () => {
    pg = await PrivatePostgres.create();
    nats = await NatsServerProcess.create();
    const url = new URL(pg.url('postgres'));
    url.password = PASSWORD; // trust auth ignores it: it must show nowhere
    const env = { DATABASE_URL: url.toString(), NATS_URL: nats.url };
    const [planePort, workerPort] = [await freePort(), await freePort()];
    spawnCli(['control-plane', '--metrics-port', String(planePort)], env);
    spawnCli(
      [
        'worker',
        '--kinds',
        'long_term_archive',
        '--handlers',
        HANDLERS,
        '--metrics-port',
        String(workerPort),
      ],
      env,
    );
    const explain = () => output.join('').slice(-3000);
    for (const port of [planePort, workerPort]) {
      await waitFor(
        said(port, 503, 'waiting for Postgres'),
        `503 waiting for Postgres on ${port}`,
        60_000,
        100,
        explain,
      );
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
    }
    const waiting = await readyz(planePort);
    expect(waiting.body).toMatchObject({
      ready: false,
      leader: false,
      checks: { database: { ok: false, error: expect.stringMatching(/ECONNREFUSED|connect/i) } },
    });
    expect((await readyz(workerPort)).body).not.toHaveProperty('leader');
    expect(JSON.stringify(waiting.body)).not.toContain(PASSWORD);

    await pg.start();
    for (const port of [planePort, workerPort]) {
      await waitFor(
        said(port, 503, 'waiting for NATS'),
        `503 waiting for NATS on ${port}`,
        60_000,
        100,
        explain,
      );
    }

    await nats.start();
    for (const port of [planePort, workerPort]) {
      await waitFor(said(port, 200), `200 on ${port}`, 60_000, 100, explain);
    }
    await waitFor(
      async () => (await readyz(planePort)).body.leader === true,
      'the control plane to say it leads',
      30_000,
      100,
      explain,
    );
    const ready = await readyz(workerPort);
    expect(ready.body).toMatchObject({
      ready: true,
      checks: { database: { ok: true }, nats: { ok: true } },
    });
    expect(ready.body).not.toHaveProperty('reason');
    for (const c of children) expect(c.exitCode).toBeNull();
    expect(output.join('')).not.toContain(PASSWORD);
  });
  it('a Postgres with every connection slot taken is waited for, not a reason to exit: the control plane leads once slots are free', async () => {
    crowded = await PrivatePostgres.create();
    const SLOTS = 12;
    await crowded.start({ max_connections: String(SLOTS), superuser_reserved_connections: '0' });
    const holder = postgres(crowded.url('postgres'), { max: SLOTS, onnotice: () => {} });
    const held = await Promise.all(Array.from({ length: SLOTS }, () => holder.reserve()));
    const port = await freePort();
    const plane = spawnCli(['control-plane', '--metrics-port', String(port)], {
      DATABASE_URL: crowded.url('postgres'),
      NATS_URL,
      OPSTATE_PREFIX: uniquePrefix('slots').replaceAll('.', '_'),
    });
    const explain = () => output.join('').slice(-3000);
    await waitFor(
      async () => {
        const r = await readyz(port);
        const database = (r.body.checks as { database?: { error?: string } } | undefined)?.database;
        return r.status === 503 && /no connection slot free/.test(database?.error ?? '');
      },
      '503 naming the full server',
      60_000,
      100,
      explain,
    );
    expect(plane.exitCode).toBeNull();
    for (const h of held) h.release();
    await holder.end({ timeout: 5 });
    await waitFor(
      async () => (await readyz(port)).body.leader === true,
      'the control plane to lead once slots are free',
      60_000,
      100,
      explain,
    );
    expect(plane.exitCode).toBeNull();
  });
});
