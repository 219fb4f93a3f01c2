import { type ChildProcess, spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection, nkeyAuthenticator } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startDashboard } from '../../dashboard/startDashboard.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { HEARTBEAT_BUCKET_MAX_VALUE_BYTES } from '../../transport/jetstream/capHeartbeatValues.ts';
import { inboxPrefixOf } from '../../transport/jetstream/inboxPrefix.ts';
import { archiveOperation, FAST_TIMING, HANDLERS } from '../actors/harness.ts';
import { type DeployNats, type DeployNatsUser, startDeployNats } from '../helpers/deployNats.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from './helpers.ts';

/**
 * The hostile-network drill (docs/trust-boundary.md): a control plane and a worker on the
 * deployment's own NATS configuration (deploy/nats.conf, NKey users, an inbox per role), while an
 * anonymous client and a peer holding another worker's credentials try every attack the trust
 * boundary is meant to stop, and a page whose name rebinds to the dashboard tries an action.
 * Each attack is refused, and every operation completes: none is kept past its timers.
 */
let nats: DeployNats | undefined;
let db: TestDatabase | undefined;
let plane: Runtime | undefined;
const children: ChildProcess[] = [];
const connections: NatsConnection[] = [];
const stops: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await gone;
    }
  }
  for (const c of connections.splice(0)) await c.close();
  await plane?.close();
  plane = undefined;
  await nats?.close();
  nats = undefined;
  await dropTestDatabase(db);
  db = undefined;
});

/**
 * `opstate worker --id worker-b` for long-term archives, as deploy/nats.conf's worker-b, with the
 * fixture's faults honoured (`FIXTURE_CRASH`).
 */
function spawnWorkerB(env: Record<string, string>) {
  const proc = spawn(
    process.execPath,
    opstateArgs([
      'worker',
      ...['--kinds', 'long_term_archive', '--handlers', HANDLERS, '--id', 'worker-b', '--faults'],
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
  let gone = false;
  proc.on('exit', () => {
    gone = true;
  });
  return { gone: () => gone, text: () => output.join('') };
}

/** A raw client holding a user's NKey, as a stolen seed or a compromised peer would, and the errors the server sends it. */
async function clientOf(user: DeployNatsUser, inboxPrefix: string) {
  const nc = await connect({
    servers: (nats as DeployNats).url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(user.seed)),
    inboxPrefix,
  });
  connections.push(nc);
  const errors: string[] = [];
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error') errors.push(s.error.message);
    }
  })();
  return { nc, errors };
}

/** One HTTP request with the headers as given (fetch sends its own Host). */
function send(url: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: body === undefined ? 'GET' : 'POST', headers },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A heartbeat value as a worker writes it, listing what it claims to hold. */
const heartbeat = (held: [string, string, number][]) =>
  JSON.stringify({ instance: 'forged-1', held });

/** A client of the broker, with the errors the server sent it. */
type Attacker = Awaited<ReturnType<typeof clientOf>>;

/**
 * Keeps writing, under the attacker's own key, a heartbeat listing operation `id` at its current
 * attempt, every heartbeat interval, until `stop` (which says how many were written).
 */
function forgeHeartbeats(bucket: KV, id: string, load: () => Promise<{ attempt: number }>) {
  let forging = true;
  let puts = 0;
  const loop = (async () => {
    while (forging) {
      const { attempt } = await load();
      await bucket.put(
        'worker.worker-a',
        heartbeat([[OperationKind.LONG_TERM_ARCHIVE, id, attempt]]),
      );
      puts++;
      await new Promise((r) => setTimeout(r, FAST_TIMING.heartbeatIntervalMs));
    }
  })();
  return {
    async stop(): Promise<number> {
      forging = false;
      await loop;
      return puts;
    },
  };
}

/** Publishes `payload` on `subject` `count` times and waits for the server to refuse it. */
async function publishRefused(attacker: Attacker, subject: string, payload: string, count: number) {
  for (let i = 0; i < count; i++) attacker.nc.publish(subject, payload);
  await attacker.nc.flush();
  await waitFor(
    () => attacker.errors.some((e) => e.includes(`Publish to "${subject}"`)),
    `the refusal of the publishes on ${subject}`,
  );
}

/**
 * Subscribes to worker-b's, the control plane's and the default inboxes and waits for the server
 * to refuse each; returns what they overheard meanwhile and after (nothing, if refused).
 */
async function otherInboxesRefused(attacker: Attacker): Promise<string[]> {
  const overheard: string[] = [];
  const refused = new Map<string, string>();
  const inboxes = [
    inboxPrefixOf('opstate', 'worker', 'worker-b'),
    inboxPrefixOf('opstate', 'control-plane'),
    '_INBOX',
  ];
  for (const inbox of inboxes) {
    const sub = attacker.nc.subscribe(`${inbox}.>`, {
      callback: (err, m) => {
        if (err === null) overheard.push(m.subject);
      },
    });
    void sub.closed.then((e) => refused.set(inbox, e instanceof Error ? e.message : String(e)));
  }
  await waitFor(
    () => refused.size === inboxes.length,
    'each subscription to another inbox to be refused',
    30_000,
    20,
    () => `refused so far: ${[...refused.keys()].join(', ') || 'none'}`,
  );
  for (const why of refused.values()) expect(why).toMatch(/Permissions Violation/);
  return overheard;
}

/** What a page served from evil.example, whose name now points at the dashboard, gets for a cancel. */
function reboundCancel(dashboardUrl: string, id: string) {
  const { port } = new URL(dashboardUrl);
  return send(
    `${dashboardUrl.replace(/\/$/, '')}/api/operations/${id}/cancel`,
    {
      host: `evil.example:${port}`,
      origin: `http://evil.example:${port}`,
      'content-type': 'application/json',
      'x-opstate-action': '1',
    },
    JSON.stringify({ reason: 'rebound' }),
  );
}

/**
 * worker-b starts an operation and dies right after START; the attacker keeps listing that
 * operation in a heartbeat of its own, at its attempt, and tries to write worker-b's key. Returns
 * once the monitor has reset it, forgery or not, with the forgery still going.
 */
async function starterDiesUnderForgery(at: {
  runtime: Runtime;
  base: Record<string, string>;
  deployed: DeployNats;
  attacker: Attacker;
  bucket: KV;
}) {
  const { runtime, base, deployed, attacker, bucket } = at;
  const crashing = spawnWorkerB({
    ...base,
    ...deployed.workerB.env,
    FIXTURE_CRASH: 'after-start',
  });
  const first = await archiveOperation({ runtime });
  await waitFor(crashing.gone, `worker-b to crash after START:\n${crashing.text()}`, 60_000);
  const started = await runtime.store.load(first.id);
  expect(started.status).toBe('IN_PROGRESS');
  expect(started.workerId).toBe('worker-b');
  const forging = forgeHeartbeats(bucket, first.id, () => runtime.store.load(first.id));
  stops.push(async () => {
    await forging.stop().catch(() => 0);
  });
  // It cannot write worker-b's key in its place: the server refuses the publish.
  await expect(
    bucket.put(
      'worker.worker-b',
      heartbeat([[OperationKind.LONG_TERM_ARCHIVE, first.id, started.attempt]]),
    ),
  ).rejects.toThrow();
  await waitFor(
    () => attacker.errors.some((e) => e.includes('$KV.opstate_heartbeats.worker.worker-b')),
    'the refusal of the forged worker-b heartbeat',
  );
  // The monitor resets the operation once worker-b's heartbeat is stale, forgery or not.
  await waitFor(
    async () => (await runtime.store.load(first.id)).attempt > started.attempt,
    `the operation worker-b dropped to be reset despite worker-a's heartbeat listing it`,
    60_000,
  );
  return { first, forging };
}

/**
 * deploy/nats.conf on a private server, a database, the control plane (as deploy/nats.conf's
 * control-plane user, on its own inbox) and the dashboard with operator actions on loopback.
 */
async function startDrillDeployment() {
  nats = await startDeployNats();
  db = await createTestDatabase('opstate_hostile');
  plane = await createRuntime({
    databaseUrl: db.url,
    natsUrl: nats.url,
    natsCredentials: nats.controlPlane.credentials,
    natsInboxPrefix: inboxPrefixOf('opstate', 'control-plane'),
    prefix: 'opstate',
    timing: FAST_TIMING,
    logger: memoryLogger(),
  });
  const runtime = plane;
  runtime.startControlPlane();

  // The dashboard, with operator actions, on loopback.
  const dashboard = await startDashboard({
    database: runtime.database,
    timing: runtime.timing,
    heartbeats: runtime.transport.heartbeats,
    command: runtime.command,
    port: 0,
    logger: memoryLogger(),
  });
  stops.push(() => dashboard.close());

  const base = { DATABASE_URL: db.url, NATS_URL: nats.url, OPSTATE_PREFIX: 'opstate' };
  return { runtime, dashboard, base, servers: nats };
}

describe('a hostile network around a running deployment (deploy/nats.conf)', () => {
  it('refuses every attack, and every operation completes within its timers', async () => {
    const { runtime, dashboard, base, servers: deployed } = await startDrillDeployment();
    const load = async (id: string) => runtime.store.load(id);

    // An anonymous client is not let in at all.
    const anonymous = await connect({ servers: deployed.url }).then(
      async (nc) => {
        await nc.close();
        return 'connected';
      },
      (e: unknown) => String(e),
    );
    expect(anonymous).toMatch(/Authorization Violation/i);

    // The attacker holds worker-a's seed: a peer of the deployment, on its own inbox.
    const attacker = await clientOf(
      deployed.workerA,
      inboxPrefixOf('opstate', 'worker', 'worker-a'),
    );
    const bucket: KV = await new Kvm(attacker.nc).open('opstate_heartbeats');

    // 1. worker-b dies on an operation it started while the attacker's heartbeat lists it.
    const { first, forging } = await starterDiesUnderForgery({
      runtime,
      base,
      deployed,
      attacker,
      bucket,
    });

    // 2. worker-b comes back; more work is submitted while the attacks go on.
    const worker = spawnWorkerB({ ...base, ...deployed.workerB.env });
    await waitFor(() => worker.text().includes('started for'), 'worker-b to start again', 60_000);
    const more = [await archiveOperation({ runtime }), await archiveOperation({ runtime })];

    // A flood of the dispatch stream: worker-a may publish no dispatch, on any subject.
    const route = defaultRoute(OperationKind.LONG_TERM_ARCHIVE);
    const dispatch = JSON.stringify({
      operationId: more[0]?.id,
      kind: OperationKind.LONG_TERM_ARCHIVE,
      operationType: route.operationType,
      attempt: 1,
    });
    await publishRefused(
      attacker,
      `opstate.dispatch.${route.locationType}.${route.operationType}`,
      dispatch,
      500,
    );
    // A forged MAX_DELIVERIES advisory naming a queued dispatch: not publishable either.
    await publishRefused(
      attacker,
      '$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.opstate_dispatch.any',
      JSON.stringify({ stream: 'opstate_dispatch', stream_seq: 1 }),
      1,
    );

    // Subscribing to another role's replies: refused, and nothing overheard (checked at the end).
    const overheard = await otherInboxesRefused(attacker);

    // An oversized heartbeat under its own key: the bucket refuses it.
    await expect(
      bucket.put('worker.worker-a', 'x'.repeat(HEARTBEAT_BUCKET_MAX_VALUE_BYTES + 1)),
    ).rejects.toThrow(/maximum|size|payload/i);

    // A page whose name now points at the dashboard asks it to cancel an operation.
    const rebound = await reboundCancel(dashboard.url, more[1]?.id as string);
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body).code).toBe('FORBIDDEN');

    // Every operation completes: the one worker-b dropped, and those submitted under attack.
    for (const { id } of [first, ...more]) {
      await waitFor(
        async () => (await load(id)).status === 'COMPLETED',
        `operation ${id} to complete under attack:\n${worker.text()}`,
        90_000,
      );
    }
    // The forged heartbeat was written, and listed the operation, all along: the reset names it.
    expect(await forging.stop()).toBeGreaterThan(1);
    const reasons = (await runtime.get(first.id)).transitions.map((t) => t.reason ?? '');
    expect(reasons.some((r) => r.includes('also listed by worker-a, which did not start it'))).toBe(
      true,
    );
    expect(overheard).toEqual([]);
    // Nothing the attacker sent reached the worker as a dispatch.
    expect(worker.text()).not.toMatch(/bad dispatch|malformed|Permissions Violation/i);
    for (const secret of deployed.secrets) expect(worker.text()).not.toContain(secret);
  });
});
