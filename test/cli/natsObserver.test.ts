import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection, nkeyAuthenticator } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { migrate } from '../../persistence/migrate.ts';
import { openDatabase } from '../../persistence/openDatabase.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import {
  createJetStreamTransport,
  type JetStreamTransport,
} from '../../transport/jetstream/createJetStreamTransport.ts';
import { inboxPrefixOf } from '../../transport/jetstream/inboxPrefix.ts';
import { FAST_TIMING } from '../actors/harness.ts';
import { type DeployNats, type DeployNatsUser, startDeployNats } from '../helpers/deployNats.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../transport/helpers.ts';

/**
 * The dashboard and `opstate status` under deploy/nats.conf's `observer` user, on a private
 * nats-server running that file: they read heartbeats and create nothing, say so when the bucket
 * is not there yet, and the server refuses the user every write.
 */
let nats: DeployNats | undefined;
let db: TestDatabase | undefined;
const runtimes: Runtime[] = [];
const children: ChildProcess[] = [];
const connections: NatsConnection[] = [];
const transports: JetStreamTransport[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    }
  }
  for (const t of transports.splice(0)) await t.close();
  for (const c of connections.splice(0)) await c.close();
  for (const r of runtimes.splice(0)) await r.close();
  await nats?.close();
  nats = undefined;
  await dropTestDatabase(db);
  db = undefined;
});

async function migratedDatabase(): Promise<TestDatabase> {
  const created = await createTestDatabase('opstate_observer', { migrated: true });
  const database = await openDatabase({ databaseUrl: created.url });
  try {
    await migrate(database);
  } finally {
    await database.close();
  }
  return created;
}

/** A bare connection as `user`, replying on `inbox` (which its permissions must allow). */
async function connectAs(server: DeployNats, user: DeployNatsUser, inbox: string) {
  const nc = await connect({
    servers: server.url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(user.seed)),
    inboxPrefix: inbox,
  });
  connections.push(nc);
  return nc;
}

/** The streams on the server, as the control plane's user sees them. */
async function streamNames(server: DeployNats): Promise<string[]> {
  const nc = await connectAs(
    server,
    server.controlPlane,
    inboxPrefixOf('opstate', 'control-plane'),
  );
  const jsm = await jetstreamManager(nc);
  const names: string[] = [];
  for (const s of ['opstate_dispatch', 'KV_opstate_heartbeats']) {
    if (
      await jsm.streams.info(s).then(
        () => true,
        () => false,
      )
    )
      names.push(s);
  }
  return names;
}

function status(env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      opstateArgs(['status', '--json']),
      { cwd: REPO_ROOT, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err === null ? 0 : (err.code as number | null), stdout, stderr }),
    );
  });
}

async function startDashboardProcess(env: Record<string, string>) {
  const proc = spawn(process.execPath, opstateArgs(['dashboard', '--port', '0']), {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(proc);
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += String(d);
  });
  proc.stderr?.on('data', (d) => {
    out += String(d);
  });
  await waitFor(
    () => /dashboard at http:\/\/127\.0\.0\.1:\d+/.test(out),
    'the dashboard to print its address',
    60_000,
    50,
    () => out,
  );
  const url = /dashboard at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] as string;
  return { proc, url, output: () => out };
}

describe('the observer user of deploy/nats.conf (the dashboard and `opstate status`)', () => {
  it('reads heartbeats as the observer, says when there is no bucket yet, and creates nothing', async () => {
    nats = await startDeployNats();
    db = await migratedDatabase();
    const env = {
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      OPSTATE_PREFIX: 'opstate',
      OPSTATE_TIMING: JSON.stringify(FAST_TIMING),
      ...nats.observer.env,
    };

    // No control plane has run: the bucket is not there, and neither reader makes it.
    // A run that could not reach the broker at all (a request timing out on a busy machine) says
    // so, and is tried again: the run that reached it is the one judged.
    const reached = (r: { stderr: string }) => !/is unreachable|timeout|TIMEOUT/.test(r.stderr);
    let before = { code: null as number | null, stdout: '', stderr: '' };
    await waitFor(
      async () => {
        before = await status(env);
        return reached(before);
      },
      'opstate status to reach NATS',
      120_000,
      250,
    );
    expect(before.code, before.stderr).toBe(0);
    expect(before.stderr).toMatch(
      /heartbeats not read: the heartbeat bucket opstate_heartbeats does not exist on this NATS server: a control plane creates it/,
    );
    expect(JSON.parse(before.stdout).attention.heartbeatsVisible).toBe(false);
    const dashboard = await startDashboardProcess(env);
    let missing = { status: 0, text: '' };
    await waitFor(
      async () => {
        const r = await fetch(`${dashboard.url}/api/workers`);
        missing = { status: r.status, text: await r.text() };
        return reached({ stderr: missing.text });
      },
      'the dashboard to reach NATS',
      120_000,
      250,
    );
    expect(missing.status).toBe(500);
    expect(missing.text).toMatch(/heartbeat bucket opstate_heartbeats does not exist/);
    expect(await streamNames(nats)).toEqual([]);

    // A control plane creates the stream and the bucket; worker-b beats under its own user.
    const plane = await createRuntime({
      databaseUrl: db.url,
      natsUrl: nats.url,
      natsCredentials: nats.controlPlane.credentials,
      natsInboxPrefix: inboxPrefixOf('opstate', 'control-plane'),
      prefix: 'opstate',
      timing: FAST_TIMING,
      logger: memoryLogger(),
    });
    runtimes.push(plane);
    plane.startControlPlane();
    const workerSide = await createRuntime({
      databaseUrl: db.url,
      natsUrl: nats.url,
      natsCredentials: nats.workerB.credentials,
      natsInboxPrefix: inboxPrefixOf('opstate', 'worker', 'worker-b'),
      ensureTransport: false,
      migrate: false,
      prefix: 'opstate',
      timing: FAST_TIMING,
      logger: memoryLogger(),
    });
    runtimes.push(workerSide);
    const worker = workerSide.startWorker({
      kinds: [OperationKind.LONG_TERM_ARCHIVE],
      handlers: { [OperationKind.LONG_TERM_ARCHIVE]: async () => ({ outputs: [] }) },
      workerId: 'worker-b',
    });
    await worker.ready;

    // Both read worker-b's heartbeat now, as the observer.
    let after = before;
    await waitFor(
      async () => {
        after = await status(env);
        return (
          after.code === 0 &&
          !after.stderr.includes('heartbeats not read') &&
          JSON.stringify(JSON.parse(after.stdout).queues).includes('worker-b')
        );
      },
      'opstate status to read the heartbeat of worker-b as the observer',
      60_000,
      250,
    );
    await waitFor(
      async () => {
        const r = await fetch(`${dashboard.url}/api/workers`);
        return r.status === 200 && (await r.text()).includes('"worker-b"');
      },
      'the dashboard to list worker-b',
      60_000,
      100,
      dashboard.output,
    );
    expect(JSON.parse(after.stdout).attention.heartbeatsVisible).toBe(true);
    for (const text of [before.stderr, after.stderr, dashboard.output()]) {
      expect(text).not.toMatch(/Permissions Violation/);
      for (const secret of nats.secrets) expect(text).not.toContain(secret);
    }
  });

  it('is refused by the server every stream, consumer and bucket change, every dispatch and every heartbeat', async () => {
    nats = await startDeployNats();
    const server = nats;
    // The control plane's user sets up what a deployment has: the stream, a consumer, the bucket.
    const plane = await createJetStreamTransport({
      servers: server.url,
      prefix: 'opstate',
      timing: FAST_TIMING,
      credentials: server.controlPlane.credentials,
      inboxPrefix: inboxPrefixOf('opstate', 'control-plane'),
    });
    transports.push(plane);
    const route = defaultRoute(OperationKind.TRANSFER);
    await plane.ensure([route]);

    const nc = await connectAs(server, server.observer, inboxPrefixOf('opstate', 'observer'));
    const jsm = await jetstreamManager(nc, { timeout: 3000 });
    const js = jetstream(nc, { timeout: 3000 });
    const permission = /permission/i;
    // Reading is allowed: the bucket's stream info, and a key by direct get.
    expect((await jsm.streams.info('KV_opstate_heartbeats')).config.name).toBe(
      'KV_opstate_heartbeats',
    );
    const bucket = await new Kvm(js).open('opstate_heartbeats', { allow_direct: true });
    expect(await bucket.get('worker.nobody')).toBeNull();
    // Everything that writes is refused by the server.
    const refusals: Record<string, Promise<unknown>> = {
      'create a stream': jsm.streams.add({ name: 'opstate_rogue', subjects: ['opstate.rogue.>'] }),
      'update the dispatch stream': jsm.streams.update('opstate_dispatch', { max_bytes: 1024 }),
      'delete the dispatch stream': jsm.streams.delete('opstate_dispatch'),
      'purge the dispatch stream': jsm.streams.purge('opstate_dispatch'),
      'delete the bucket': jsm.streams.delete('KV_opstate_heartbeats'),
      'create a consumer': jsm.consumers.add('opstate_dispatch', {
        durable_name: 'rogue',
        filter_subject: 'opstate.dispatch.>',
      }),
      // Nor may it read what it does not need.
      'read the dispatch stream': jsm.streams.info('opstate_dispatch'),
      'publish a dispatch': js.publish(
        `opstate.dispatch.${route.locationType}.${route.operationType}`,
        '{}',
      ),
      'write a heartbeat': bucket.put('worker.worker-b', '{}'),
    };
    for (const [what, attempt] of Object.entries(refusals)) {
      await expect(attempt, what).rejects.toThrow(permission);
    }
    // Nothing changed: the stream, its one consumer and the bucket are as the control plane made them.
    const planeJsm = await jetstreamManager(plane.connection);
    const dispatch = await planeJsm.streams.info('opstate_dispatch');
    expect(dispatch.state.messages).toBe(0);
    expect(dispatch.config.max_bytes).not.toBe(1024);
    await expect(planeJsm.consumers.info('opstate_dispatch', 'rogue')).rejects.toThrow(
      /consumer not found/i,
    );
    expect(await streamNames(server)).toEqual(['opstate_dispatch', 'KV_opstate_heartbeats']);

    // The observer transport itself never asks: each write is refused before any request.
    const observer = await createJetStreamTransport({
      servers: server.url,
      prefix: 'opstate',
      timing: FAST_TIMING,
      credentials: server.observer.credentials,
      inboxPrefix: inboxPrefixOf('opstate', 'observer'),
      observer: true,
    });
    transports.push(observer);
    await expect(observer.ensure([route])).rejects.toThrow(/observes NATS only.*may not create/);
    expect(() =>
      observer.publish(route, {
        operationId: '0190d8a2-0000-7000-8000-000000000000',
        kind: OperationKind.TRANSFER,
        operationType: route.operationType,
        attempt: 1,
      }),
    ).toThrow(/may not publish a dispatch/);
    expect(() => observer.consume(route, { concurrency: 1 }, async () => {})).toThrow(
      /may not consume/,
    );
    await expect(observer.heartbeats.beat('worker-b', [])).rejects.toThrow(
      /may not write a heartbeat/,
    );
    expect(await observer.heartbeats.list()).toEqual([]);
  });
});
