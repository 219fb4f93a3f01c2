import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OpstateError } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { createMetrics } from '../../runtime/Metrics.ts';
import { startMetricsServer } from '../../runtime/metricsServer.ts';
import { createRuntime } from '../../runtime/Runtime.ts';
import {
  acceptsAnonymous,
  INSECURE_NATS_WARNING,
} from '../../transport/jetstream/anonymousNats.ts';
import { createJetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { deploymentPerTest, FAST_TIMING, NATS_URL, waitFor } from '../actors/harness.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { NatsServerProcess, uniquePrefix } from './helpers.ts';

/**
 * A runtime refuses a NATS that takes clients without credentials unless told that is meant
 * (docs/trust-boundary.md), against the shared development server (which takes anyone) and a
 * private server that asks for authentication but maps anonymous clients to a user.
 */
const deploy = deploymentPerTest();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function refusal(promise: Promise<unknown>): Promise<OpstateError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  return err as OpstateError;
}

/** A private server that asks for authentication, and lets anonymous clients in as `anon`. */
async function serverWithNoAuthUser(): Promise<NatsServerProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'opstate-noauth-'));
  const conf = join(dir, 'nats.conf');
  await writeFile(
    conf,
    [
      'jetstream: enabled',
      'accounts { A { jetstream: enabled, users: [ { user: anon, password: anon-pw-1 }, { user: app, password: app-pw-22 } ] } }',
      'no_auth_user: anon',
    ].join('\n'),
  );
  const server = await NatsServerProcess.create();
  await server.start({ args: ['-c', conf] });
  cleanups.push(async () => {
    await server.dispose();
    await rm(dir, { recursive: true, force: true });
  });
  return server;
}

describe('a NATS that takes clients without credentials', () => {
  it('is refused by the transport with CONFIG saying why and how, unless insecureNats', async () => {
    const prefix = uniquePrefix('anon').replaceAll('.', '_');
    const err = await refusal(createJetStreamTransport({ servers: NATS_URL, prefix }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(`NATS at ${NATS_URL} accepts clients without credentials`);
    expect(err.message).toContain('--insecure-nats (OPSTATE_NATS_INSECURE=1');
    expect(err.message).toContain('insecureNats: true');
    expect(err.message).toContain('OPSTATE_NATS_NKEY_SEED_FILE');

    const transport = await createJetStreamTransport({
      servers: NATS_URL,
      prefix,
      insecureNats: true,
    });
    try {
      expect(transport.acceptsAnonymous).toBe(true);
      await transport.ensure([]);
    } finally {
      await transport.destroy();
      await transport.close();
    }
  });

  it('is refused when the server lets anonymous clients in as a user, whatever this process gives', async () => {
    // A no_auth_user maps anyone who gives nothing to that user: its INFO does not ask for
    // authentication, so a process with credentials of its own is refused too.
    const server = await serverWithNoAuthUser();
    const prefix = uniquePrefix('noauth').replaceAll('.', '_');
    for (const given of [
      {},
      { credentials: { auth: { type: 'user', user: 'app', password: 'app-pw-22' } } as const },
    ]) {
      const err = await refusal(
        createJetStreamTransport({ servers: server.url, prefix, ...given }),
      );
      expect(err.code).toBe('CONFIG');
      expect(err.message).toContain('accepts clients without credentials');
    }
  });

  it('judges a server that asks for authentication by whether this process gave any', () => {
    const servers = ['nats://n1:4222'];
    const asks = { auth_required: true };
    expect(acceptsAnonymous({}, { auth: { type: 'token', token: 't' } }, servers)).toBe(true);
    expect(acceptsAnonymous(asks, { auth: { type: 'token', token: 't' } }, servers)).toBe(false);
    expect(acceptsAnonymous(asks, { auth: { type: 'nkey', seedFile: '/s' } }, servers)).toBe(false);
    // Let in with nothing given: it takes anyone.
    expect(acceptsAnonymous(asks, { auth: { type: 'none' } }, servers)).toBe(true);
    expect(acceptsAnonymous(asks, undefined, servers)).toBe(true);
    // Credentials in a server URL count.
    expect(acceptsAnonymous(asks, undefined, ['nats://app:pw@n1:4222'])).toBe(false);
    // A connection opened elsewhere: only the INFO tells.
    expect(acceptsAnonymous(asks, 'unknown', servers)).toBe(false);
    expect(acceptsAnonymous({ auth_required: false }, 'unknown', servers)).toBe(true);
  });

  it('lets a process with its own credentials in when the server asks everyone for them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-auth-'));
    const conf = join(dir, 'nats.conf');
    await writeFile(conf, 'jetstream: enabled\nauthorization { token: "tok-for-anon-test-1" }\n');
    const server = await NatsServerProcess.create();
    await server.start({ args: ['-c', conf] });
    cleanups.push(async () => {
      await server.dispose();
      await rm(dir, { recursive: true, force: true });
    });
    const transport = await createJetStreamTransport({
      servers: server.url,
      prefix: uniquePrefix('tok').replaceAll('.', '_'),
      credentials: { auth: { type: 'token', token: 'tok-for-anon-test-1' } },
    });
    expect(transport.acceptsAnonymous).toBe(false);
    await transport.close();
  });

  it('stops createRuntime unless insecureNats, and logs one WARNING when it is given', async () => {
    const db: TestDatabase = await createTestDatabase('opstate_anon');
    cleanups.push(() => dropTestDatabase(db));
    const prefix = uniquePrefix('anonrt').replaceAll('.', '_');
    cleanups.push(async () => {
      const t = await createJetStreamTransport({ servers: NATS_URL, prefix, insecureNats: true });
      await t.destroy();
      await t.close();
    });
    const options = { databaseUrl: db.url, natsUrl: NATS_URL, prefix, timing: FAST_TIMING };
    // The suite's environment says OPSTATE_NATS_INSECURE=1: an environment of its own does not.
    const err = await refusal(createRuntime({ ...options, env: {}, logger: memoryLogger() }));
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain('accepts clients without credentials');
    const fromEnv = memoryLogger();
    const viaEnv = await createRuntime({
      ...options,
      env: { OPSTATE_NATS_INSECURE: '1' },
      logger: fromEnv,
    });
    await viaEnv.close();
    const logger = memoryLogger();
    const runtime = await createRuntime({ ...options, env: {}, insecureNats: true, logger });
    try {
      for (const l of [fromEnv, logger]) {
        expect(l.lines.filter((x) => x.level === 'WARNING').map((x) => x.message)).toEqual([
          INSECURE_NATS_WARNING,
        ]);
      }
      expect(runtime.mode.transport).toBe('jetstream');
    } finally {
      await runtime.close();
    }
  });

  it('stops opstate control-plane and worker with exit 2 unless --insecure-nats', async () => {
    const dep = await deploy(FAST_TIMING);
    const secure = { OPSTATE_NATS_INSECURE: '' };
    const plane = dep.spawnCli(['control-plane'], secure);
    expect(await plane.exited).toBe(2);
    expect(plane.printed('accepts clients without credentials')).toBe(true);
    expect(plane.printed('--insecure-nats')).toBe(true);
    const worker = dep.spawnWorker(secure);
    expect(await worker.exited).toBe(2);
    expect(worker.printed('accepts clients without credentials')).toBe(true);

    const allowed = dep.spawnWorker(secure, ['--insecure-nats']);
    await waitFor(() => allowed.printed('started for'), 'the worker told --insecure-nats', 60_000);
    expect(allowed.output.filter((l) => l.includes(INSECURE_NATS_WARNING))).toHaveLength(1);
  });
});

describe('the metrics server', () => {
  it('listens on 127.0.0.1 unless told another address', async () => {
    // Linux routes all of 127/8 to the loopback interface: a server bound to 127.0.0.1 alone
    // is not reached at 127.0.0.2; one bound to every interface is.
    const reaches = (host: string, port: number) =>
      fetch(`http://${host}:${port}/healthz`).then(
        (r) => r.status,
        () => 'refused',
      );
    const metrics = createMetrics(memoryLogger());
    const readiness = async () => ({ ready: true, checks: {} });
    const loopback = await startMetricsServer({ port: 0, registry: metrics.registry, readiness });
    cleanups.push(() => loopback.close());
    expect(await reaches('127.0.0.1', loopback.port)).toBe(200);
    expect(await reaches('127.0.0.2', loopback.port)).toBe('refused');
    const every = await startMetricsServer({
      port: 0,
      host: '0.0.0.0',
      registry: metrics.registry,
      readiness,
    });
    cleanups.push(() => every.close());
    expect(await reaches('127.0.0.2', every.port)).toBe(200);
  });

  it('takes --metrics-host and OPSTATE_METRICS_HOST in the CLI', async () => {
    const dep = await deploy(FAST_TIMING);
    const portOf = async (child: ReturnType<typeof dep.spawnCli>) => {
      await waitFor(() => child.printed('metrics on port'), 'metrics to be served', 60_000);
      const line = child.output.find((l) => l.includes('metrics on port')) as string;
      return Number(/metrics on port (\d+)/.exec(line)?.[1]);
    };
    const reaches = (host: string, port: number) =>
      fetch(`http://${host}:${port}/healthz`).then(
        (r) => r.status,
        () => 'refused',
      );
    const byDefault = dep.spawnCli(['control-plane', '--metrics-port', '0']);
    const flagged = dep.spawnCli([
      'control-plane',
      '--metrics-port',
      '0',
      '--metrics-host',
      '127.0.0.2',
    ]);
    const fromEnv = dep.spawnCli(['control-plane', '--metrics-port', '0'], {
      OPSTATE_METRICS_HOST: '0.0.0.0',
    });
    const [d, f, e] = await Promise.all([portOf(byDefault), portOf(flagged), portOf(fromEnv)]);
    expect(await reaches('127.0.0.1', d)).toBe(200);
    expect(await reaches('127.0.0.2', d)).toBe('refused');
    expect(await reaches('127.0.0.2', f)).toBe(200);
    expect(await reaches('127.0.0.1', f)).toBe('refused');
    expect(await reaches('127.0.0.2', e)).toBe(200);
    expect(await reaches('127.0.0.1', e)).toBe(200);
  });
});
