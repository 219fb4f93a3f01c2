import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createAccount,
  createOperator,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fmtCreds,
} from '@nats-io/jwt';
import { createUser } from '@nats-io/nkeys';
import { connect, type NatsConnection, nkeyAuthenticator } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import {
  createJetStreamTransport,
  type JetStreamTransport,
} from '../../transport/jetstream/createJetStreamTransport.ts';
import { inboxPrefixOf } from '../../transport/jetstream/inboxPrefix.ts';
import type { NatsCredentials } from '../../transport/jetstream/natsCredentials.ts';
import { archiveOperation, FAST_TIMING, HANDLERS } from '../actors/harness.ts';
import { type DeployNats, startDeployNats } from '../helpers/deployNats.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { freePort, NatsServerProcess, waitFor } from '../transport/helpers.ts';

let deployNats: DeployNats | undefined;
let server: NatsServerProcess | undefined;
let db: TestDatabase | undefined;
let plane: Runtime | undefined;
const children: ChildProcess[] = [];
const extraTransports: JetStreamTransport[] = [];
const spies: NatsConnection[] = [];

afterEach(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(
    children.map((c) =>
      c.exitCode !== null || c.signalCode !== null
        ? undefined
        : new Promise((r) => c.once('exit', r)),
    ),
  );
  children.length = 0;
  for (const t of extraTransports.splice(0)) await t.close();
  for (const c of spies.splice(0)) await c.close();
  await plane?.close();
  plane = undefined;
  await server?.dispose();
  server = undefined;
  await deployNats?.close();
  deployNats = undefined;
  if (db !== undefined) await dropTestDatabase(db);
  db = undefined;
});

function spawnWorker(env: Record<string, string>) {
  const proc = spawn(
    process.execPath,
    opstateArgs([
      'worker',
      '--kinds',
      'long_term_archive',
      '--handlers',
      HANDLERS,
      '--id',
      'worker-b',
    ]),
    {
      cwd: REPO_ROOT,
      env: { ...process.env, OPSTATE_TIMING: JSON.stringify(FAST_TIMING), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(proc);
  const output: string[] = [];
  proc.stdout?.on('data', (b: Buffer) => output.push(b.toString()));
  proc.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  return { proc, output, exited, text: () => output.join('') };
}

describe('NATS with authorization on (deploy/nats.conf)', () => {
  it('refuses a worker without credentials, serves one with them, and lets no worker publish dispatches', async () => {
    deployNats = await startDeployNats();
    const nats = deployNats;
    db = await createTestDatabase('opstate_natsauth');
    const url = nats.url;
    // The control plane, with its own credentials: creates the stream, consumers, bucket.
    const planeLogger = memoryLogger();
    plane = await createRuntime({
      databaseUrl: db.url,
      natsUrl: url,
      natsCredentials: nats.controlPlane.credentials,
      // deploy/nats.conf lets the control plane read its own replies only.
      natsInboxPrefix: inboxPrefixOf('opstate', 'control-plane'),
      prefix: 'opstate',
      timing: FAST_TIMING,
      logger: planeLogger,
    });
    plane.startControlPlane();
    const base = { DATABASE_URL: db.url, NATS_URL: url, OPSTATE_PREFIX: 'opstate' };

    // No credentials: refused at start, with an error that says what to set.
    const anonymous = spawnWorker(base);
    expect(await anonymous.exited).toBe(1);
    expect(anonymous.text()).toMatch(/Authorization Violation/i);
    expect(anonymous.text()).toContain('OPSTATE_NATS_USER');

    // worker-a listens for the replies of worker-b and of the control plane — JetStream's
    // answers, the dispatches worker-b pulls — and for every reply of the old shared prefix: each
    // subscription is refused, and nothing reaches it while worker-b pulls and completes one.
    const spy = await connect({
      servers: url,
      authenticator: nkeyAuthenticator(new TextEncoder().encode(nats.workerA.seed)),
      inboxPrefix: inboxPrefixOf('opstate', 'worker', 'worker-a'),
    });
    spies.push(spy);
    const overheard: string[] = [];
    const refusals = [
      inboxPrefixOf('opstate', 'worker', 'worker-b'),
      inboxPrefixOf('opstate', 'control-plane'),
      inboxPrefixOf('opstate', 'observer'),
      '_INBOX',
    ].map((inbox) => {
      const sub = spy.subscribe(`${inbox}.>`, {
        // The refusal reaches the callback as an error; a message would be overheard.
        callback: (err, m) => {
          if (err === null) overheard.push(m.subject);
        },
      });
      return sub.closed.then((e) => (e instanceof Error ? e.message : String(e)));
    });
    // Its own inbox it may read: the JetStream API answers it there.
    expect((await spy.request('$JS.API.INFO', '', { timeout: 5000 })).json()).toHaveProperty(
      'type',
    );

    // worker-b serves long-term archive: it completes one.
    const worker = spawnWorker({ ...base, ...nats.workerB.env });
    await waitFor(() => worker.text().includes('started for'), 'worker-b to start', 60_000);
    const { id } = await archiveOperation({ runtime: plane });
    await waitFor(
      async () => (await plane?.store.load(id))?.status === 'COMPLETED',
      `the archive to complete on worker-b:\n${worker.text()}`,
      30_000,
    );

    for (const refusal of await Promise.all(refusals)) {
      expect(refusal).toMatch(/Permissions Violation for Subscription/);
    }
    expect(overheard).toEqual([]);

    // Its heartbeat got through: the control plane reads it.
    await waitFor(
      async () =>
        ((await plane?.transport.heartbeats.list()) ?? []).some((h) => h.workerId === 'worker-b'),
      "worker-b's heartbeat",
    );

    // `opstate status` reads the heartbeats with the credentials of the one configuration (here
    // the observer's, its own user): with them it judges by heartbeats, without them it says it
    // could not.
    const status = (env: Record<string, string>) =>
      new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        execFile(
          process.execPath,
          opstateArgs(['status', '--json']),
          {
            cwd: REPO_ROOT,
            env: { ...process.env, ...base, OPSTATE_TIMING: JSON.stringify(FAST_TIMING), ...env },
            encoding: 'utf8',
            timeout: 60_000,
          },
          (err, stdout, stderr) =>
            resolve({ status: err === null ? 0 : (err.code as number | null), stdout, stderr }),
        );
      });
    const withCredentials = await status(nats.observer.env);
    expect(withCredentials.status, withCredentials.stderr).toBe(0);
    expect(withCredentials.stderr).not.toContain('heartbeats not read');
    expect(JSON.parse(withCredentials.stdout).attention.heartbeatsVisible).toBe(true);
    const withoutCredentials = await status({});
    expect(withoutCredentials.status, withoutCredentials.stderr).toBe(0);
    expect(withoutCredentials.stderr).toMatch(/heartbeats not read: .*Authorization Violation/i);
    expect(JSON.parse(withoutCredentials.stdout).attention.heartbeatsVisible).toBe(false);
    for (const r of [withCredentials, withoutCredentials]) {
      for (const secret of nats.secrets) expect(r.stdout + r.stderr).not.toContain(secret);
    }

    // With worker-b's credentials, no dispatch can be published: not to a queue worker-b does
    // not serve, nor to its own.
    const asWorker = await createJetStreamTransport({
      servers: url,
      prefix: 'opstate',
      timing: FAST_TIMING,
      credentials: nats.workerB.credentials,
      inboxPrefix: inboxPrefixOf('opstate', 'worker', 'worker-b'),
      requestTimeoutMs: 2000,
    });
    extraTransports.push(asWorker);
    for (const kind of [OperationKind.TRANSFER, OperationKind.LONG_TERM_ARCHIVE]) {
      const route = defaultRoute(kind);
      await expect(
        asWorker.publish(route, {
          operationId: id,
          kind,
          operationType: route.operationType,
          attempt: 9,
        }),
      ).rejects.toThrow(/permission|publish/i);
    }
    // Nor can it create a stream, a consumer or the stream's settings.
    await expect(asWorker.ensure([defaultRoute(OperationKind.TRANSFER)])).rejects.toThrow();
    expect(worker.proc.exitCode).toBeNull();
    // Everything worker-b needs (pull, ack, heartbeats) is within its permissions.
    expect(worker.text()).not.toMatch(/Permissions Violation|"level":(40|50)/);
    // And everything the control plane does (schedule, publish, watch heartbeats) within its own.
    expect(planeLogger.lines.filter((l) => l.level !== 'DEBUG' && l.level !== 'INFO')).toEqual([]);
    for (const c of [anonymous, worker]) {
      for (const secret of nats.secrets) expect(c.text()).not.toContain(secret);
    }
  });
});

describe('NATS credentials other than a password', () => {
  async function serverWith(authorization: string, dir: string) {
    const conf = join(dir, `nats-${Math.random().toString(36).slice(2)}.conf`);
    await writeFile(conf, `authorization {\n${authorization}\n}\n`);
    const s = await NatsServerProcess.create();
    await s.start({ args: ['-c', conf] });
    return s;
  }

  async function connects(url: string, credentials: NatsCredentials | undefined) {
    const t = await createJetStreamTransport({
      servers: url,
      prefix: `auth_${Math.random().toString(36).slice(2, 8)}`,
      timing: FAST_TIMING,
      requestTimeoutMs: 2000,
      ...(credentials === undefined ? {} : { credentials }),
    });
    try {
      await t.ensure([defaultRoute(OperationKind.STAGING)]);
      return 'ok';
    } finally {
      await t.destroy();
    }
  }

  it('connects with an NKey seed file or a token, and is refused without them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-nats-auth-'));
    try {
      const user = createUser();
      const seedFile = join(dir, 'user.nk');
      await writeFile(seedFile, new TextDecoder().decode(user.getSeed()), { mode: 0o600 });
      server = await serverWith(`  users: [ { nkey: ${user.getPublicKey()} } ]`, dir);
      expect(await connects(server.url, { auth: { type: 'nkey', seedFile } })).toBe('ok');
      // The same from the environment, through the runtime's configuration.
      db = await createTestDatabase('opstate_natsnkey');
      const fromEnv = await createRuntime({
        env: { DATABASE_URL: db.url, NATS_URL: server.url, OPSTATE_NATS_NKEY_SEED_FILE: seedFile },
        prefix: `nkey_${Math.random().toString(36).slice(2, 8)}`,
        logger: memoryLogger(),
      });
      expect(fromEnv.mode.transport).toBe('jetstream');
      await fromEnv.close();
      await expect(connects(server.url, undefined)).rejects.toThrow(/NATS refused the connection/);
      await expect(
        connects(server.url, { auth: { type: 'nkey', seedFile: join(dir, 'missing.nk') } }),
      ).rejects.toThrow(/cannot read the NKey seed at .*missing\.nk/);
      await server.dispose();

      const token = `tok-${Math.random().toString(36).slice(2)}`;
      server = await serverWith(`  token: "${token}"`, dir);
      expect(await connects(server.url, { auth: { type: 'token', token } })).toBe('ok');
      const refused = await connects(server.url, {
        auth: { type: 'token', token: 'wrong-token' },
      }).catch((err: Error) => err.message);
      expect(refused).toMatch(/NATS refused the connection/);
      expect(refused).not.toContain(token);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  /**
   * Operator (JWT) mode: an operator signs an account with JetStream enabled and a system
   * account, preloaded into the server's memory resolver; the account signs a user whose JWT and
   * seed make the `.creds` file.
   */
  async function operatorMode(dir: string) {
    const operator = createOperator();
    const account = createAccount();
    const system = createAccount();
    // Every limit unlimited (one left out is 0: no connection, no subscription), JetStream on.
    const limits = {
      ...{ subs: -1, data: -1, payload: -1, imports: -1, exports: -1, conn: -1, leaf: -1 },
      ...{ wildcards: true, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 },
    };
    const accountJwt = await encodeAccount('opstate', account, { limits }, { signer: operator });
    const systemJwt = await encodeAccount('SYS', system, {}, { signer: operator });
    const operatorJwt = await encodeOperator('opstate-test', operator, {
      system_account: system.getPublicKey(),
    });
    const conf = join(dir, 'operator.conf');
    await writeFile(
      conf,
      [
        `operator: ${operatorJwt}`,
        `system_account: ${system.getPublicKey()}`,
        'resolver: MEMORY',
        'resolver_preload: {',
        `  ${account.getPublicKey()}: ${accountJwt}`,
        `  ${system.getPublicKey()}: ${systemJwt}`,
        '}',
        '',
      ].join('\n'),
    );
    const credsFor = async (signer: ReturnType<typeof createAccount>, name: string) => {
      const user = createUser();
      const jwt = await encodeUser(name, user, signer);
      const file = join(dir, `${name}.creds`);
      await writeFile(file, fmtCreds(jwt, user), { mode: 0o600 });
      return { file, seed: new TextDecoder().decode(user.getSeed()) };
    };
    return {
      conf,
      user: await credsFor(account, 'worker'),
      // Signed by an account this server does not know.
      stranger: await credsFor(createAccount(), 'stranger'),
    };
  }

  it('connects with a .creds file in operator mode, as a runtime and as a worker process, and is refused with an unknown one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-nats-creds-'));
    try {
      const { conf, user, stranger } = await operatorMode(dir);
      server = await NatsServerProcess.create();
      await server.start({ args: ['-c', conf] });
      const creds = { auth: { type: 'creds', credsFile: user.file } } as const;
      expect(await connects(server.url, creds)).toBe('ok');
      const refused = await connects(server.url, {
        auth: { type: 'creds', credsFile: stranger.file },
      }).catch((err: Error) => err.message);
      expect(refused).toMatch(/NATS refused the connection: .*OPSTATE_NATS_CREDS_FILE/);
      expect(refused).not.toContain(stranger.seed);
      await expect(connects(server.url, undefined)).rejects.toThrow(/NATS refused the connection/);

      // The same credentials from the environment: a control plane and a worker process.
      db = await createTestDatabase('opstate_natscreds');
      plane = await createRuntime({
        databaseUrl: db.url,
        natsUrl: server.url,
        natsCredentials: creds,
        timing: FAST_TIMING,
        logger: memoryLogger(),
      });
      plane.startControlPlane();
      const port = await freePort();
      const worker = spawnWorker({
        DATABASE_URL: db.url,
        NATS_URL: server.url,
        OPSTATE_NATS_CREDS_FILE: user.file,
        OPSTATE_METRICS_PORT: String(port),
      });
      await waitFor(
        async () =>
          (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
        `the creds worker to be ready:\n${worker.text()}`,
        60_000,
      );
      await waitFor(
        async () =>
          ((await plane?.transport.heartbeats.list()) ?? []).some((h) => h.workerId === 'worker-b'),
        "the creds worker's heartbeat",
      );
      expect(worker.text()).not.toContain(user.seed);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
