import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { secretsOf } from '../../cli/runtimeFromEnv.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { defaultRoute, queueName } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { loadConfiguration, redactConfiguration } from '../../runtime/Configuration.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../../runtime/Runtime.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { NATS_URL } from '../archive/world.ts';
import { createTestDatabase, dropTestDatabase } from '../helpers/postgres.ts';
import { uniquePrefix } from '../transport/helpers.ts';

function refusal(env: NodeJS.ProcessEnv, flags = {}): OpstateError {
  try {
    loadConfiguration(env, flags);
  } catch (err) {
    if (err instanceof OpstateError) return err;
    throw err;
  }
  throw new Error('the configuration was accepted');
}

describe('loadConfiguration', () => {
  it('defaults to the embedded deployment', () => {
    expect(loadConfiguration({})).toEqual({
      database: { dataDir: './.opstate', schema: 'opstate', tls: 'disable', tlsFiles: {} },
      nats: { auth: { type: 'none' }, insecure: false },
      prefix: 'opstate',
      timing: {},
      deadlines: {},
      logLevel: 'info',
      metricsHost: '127.0.0.1',
    });
  });

  it('reads every variable, and a flag wins over the environment', () => {
    const config = loadConfiguration(
      {
        DATABASE_URL: 'postgres://app:pw@db:5432/app',
        OPSTATE_DB_SCHEMA: 'ingest_ops',
        OPSTATE_DATABASE_TLS: 'verify-full',
        OPSTATE_DATABASE_CA_FILE: '/etc/ca.pem',
        NATS_URL: 'tls://n1:4222,tls://n2:4222',
        OPSTATE_NATS_CREDS_FILE: '/run/worker.creds',
        OPSTATE_PREFIX: 'prod_a',
        OPSTATE_TIMING: '{"heartbeatIntervalMs":1000}',
        OPSTATE_LOG_LEVEL: 'debug',
        OPSTATE_METRICS_PORT: '9000',
        OPSTATE_METRICS_HOST: '10.0.0.7',
        OPSTATE_NATS_INSECURE: 'true',
        OPSTATE_SERVICE_NAME: 'ingest',
        OPSTATE_DISPATCH_MAX_BYTES: '2097152',
        OPSTATE_QUEUE_MAX_IN_FLIGHT: '5000',
        OPSTATE_NATS_REPLICAS: '3',
        OPSTATE_DEADLINES: '{"long_term_archive":"6h","transfer":7200000,"staging":"90m"}',
      },
      { metricsPort: '9464', metricsHost: '0.0.0.0' },
    );
    expect(config).toEqual({
      database: {
        url: 'postgres://app:pw@db:5432/app',
        dataDir: './.opstate',
        schema: 'ingest_ops',
        tls: 'verify-full',
        tlsFiles: { caFile: '/etc/ca.pem' },
      },
      nats: {
        url: 'tls://n1:4222,tls://n2:4222',
        auth: { type: 'creds', credsFile: '/run/worker.creds' },
        tls: {},
        dispatchMaxBytes: 2_097_152,
        queueMaxInFlight: 5000,
        replicas: 3,
        insecure: true,
      },
      prefix: 'prod_a',
      timing: { heartbeatIntervalMs: 1000 },
      deadlines: { long_term_archive: 21_600_000, transfer: 7_200_000, staging: 5_400_000 },
      logLevel: 'debug',
      metricsPort: 9464,
      metricsHost: '0.0.0.0',
      serviceName: 'ingest',
    });
    // The flag says yes whatever the variable says.
    expect(loadConfiguration({}, { insecureNats: true }).nats.insecure).toBe(true);
    expect(loadConfiguration({ OPSTATE_NATS_INSECURE: '0' }).nats.insecure).toBe(false);
  });

  it.each([
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL must be postgres://'],
    [{ NATS_URL: 'http://x:4222' }, 'NATS_URL must be nats://host:port or tls://'],
    [{ OPSTATE_PREFIX: 'a.b' }, "OPSTATE_PREFIX must be letters, digits, '-' and '_'"],
    [{ OPSTATE_TIMING: '{"ackWaitMs":-1}' }, 'OPSTATE_TIMING must be a JSON object'],
    [{ OPSTATE_TIMING: 'soon' }, 'OPSTATE_TIMING must be a JSON object'],
    [{ OPSTATE_LOG_LEVEL: 'loud' }, 'OPSTATE_LOG_LEVEL must be trace | debug | info'],
    [{ OPSTATE_METRICS_PORT: '70000' }, 'OPSTATE_METRICS_PORT / --metrics-port must be a TCP port'],
    [
      { OPSTATE_METRICS_HOST: 'evil host/x' },
      'OPSTATE_METRICS_HOST / --metrics-host must be an IP address or host name',
    ],
    [{ OPSTATE_NATS_INSECURE: 'yes' }, 'OPSTATE_NATS_INSECURE / --insecure-nats must be 1 or true'],
    [
      { OPSTATE_DISPATCH_MAX_BYTES: '1000' },
      'OPSTATE_DISPATCH_MAX_BYTES must be a whole number of bytes',
    ],
    [
      { OPSTATE_QUEUE_MAX_IN_FLIGHT: '0' },
      'OPSTATE_QUEUE_MAX_IN_FLIGHT must be dispatches one queue may have handed out',
    ],
    [
      { OPSTATE_QUEUE_MAX_IN_FLIGHT: '1000001' },
      'OPSTATE_QUEUE_MAX_IN_FLIGHT must be dispatches one queue may have handed out',
    ],
    [{ OPSTATE_NATS_REPLICAS: '0' }, 'OPSTATE_NATS_REPLICAS must be copies of the dispatch stream'],
    [{ OPSTATE_NATS_REPLICAS: '6' }, 'OPSTATE_NATS_REPLICAS must be copies of the dispatch stream'],
    [{ OPSTATE_DB_SCHEMA: 'Ops-State' }, 'OPSTATE_DB_SCHEMA must be a lowercase identifier'],
    [{ OPSTATE_DB_SCHEMA: 'public' }, "is where an application's own tables are"],
    [{ OPSTATE_DB_SCHEMA: 'pg_ops' }, 'starts with pg_'],
    [
      { OPSTATE_DATABASE_TLS: 'yes' },
      'OPSTATE_DATABASE_TLS must be disable | require | verify-full',
    ],
  ])('refuses %j naming the variable and what it allows', (env, message) => {
    const err = refusal(env);
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(message);
  });

  it.each([
    [
      { OPSTATE_PREFIX: 'a.b' },
      "OPSTATE_PREFIX must be letters, digits, '-' and '_' (default opstate); got 'a.b'",
    ],
    [
      { OPSTATE_LOG_LEVEL: 'loud' },
      "OPSTATE_LOG_LEVEL must be trace | debug | info | warn | error | fatal | silent (default info); got 'loud'",
    ],
    [
      { OPSTATE_SERVICE_NAME: 'x'.repeat(65) },
      `OPSTATE_SERVICE_NAME must be 1 to 64 characters of letters, digits and . _ : @ / -, other than scheduler, heartbeat_monitor, deadline, reconciler, broker (default: the package.json name, else service); got '${'x'.repeat(65)}' (it is 65 characters long)`,
    ],
    [
      { OPSTATE_DEADLINES: '{"tranfer":"2h","staging":"8d","unpack":"soon","transfer":0}' },
      `OPSTATE_DEADLINES must be a JSON object of operation kinds to how long one attempt may run, such as {"long_term_archive":"6h","transfer":"2h"}, each a duration (500ms, 30s, 5m, 2h or 1d) or a number of milliseconds, at most 7d (default: 6h, a transfer 12h, a long-term archive and staging 24h); got '{"tranfer":"2h","staging":"8d","unpack":"soon","transfer":0}' (unknown kind 'tranfer'; use one of raw_data_package, data_transfer_package, transfer, unpack, long_term_archive, staging; the deadline of staging is longer than 7 days; the deadline of unpack is 'soon', not a duration; the deadline of transfer must be a whole number of milliseconds from 1 to 604800000 (7 days); got 0)`,
    ],
    [
      { OPSTATE_DEADLINES: '["6h"]' },
      `OPSTATE_DEADLINES must be a JSON object of operation kinds to how long one attempt may run, such as {"long_term_archive":"6h","transfer":"2h"}, each a duration (500ms, 30s, 5m, 2h or 1d) or a number of milliseconds, at most 7d (default: 6h, a transfer 12h, a long-term archive and staging 24h); got '["6h"]' (is not an object of kinds to durations)`,
    ],
  ])('says what %j allows in its own words, not the validator’s', (env, message) => {
    expect(refusal(env).message).toBe(message);
  });

  it('refuses two ways of NATS credentials, a half pair, and TLS files with TLS off', () => {
    expect(refusal({ OPSTATE_NATS_TOKEN: 'abc', OPSTATE_NATS_CREDS_FILE: '/c' }).message).toContain(
      'given 2 ways',
    );
    expect(refusal({ OPSTATE_NATS_USER: 'w' }).message).toContain('set both or neither');
    expect(refusal({ OPSTATE_NATS_CERT_FILE: '/c.pem' }).message).toContain(
      'OPSTATE_NATS_CERT_FILE and OPSTATE_NATS_KEY_FILE go together',
    );
    expect(refusal({ OPSTATE_DATABASE_CA_FILE: '/ca.pem' }).message).toContain(
      'OPSTATE_DATABASE_TLS is disable',
    );
  });

  it('never shows a secret, neither in a refusal nor redacted', () => {
    const err = refusal({ OPSTATE_NATS_PASSWORD: 'hunter22-secret' });
    expect(err.message).not.toContain('hunter22-secret');
    const url = refusal({ DATABASE_URL: 'mysql://app:db-pass-0@db/app' });
    expect(url.message).toContain("got 'mysql://app:***@db/app'");
    const config = loadConfiguration({
      DATABASE_URL: 'postgres://app:db-pass-1@db/app',
      NATS_URL: 'nats://tok-in-url@n1:4222',
      OPSTATE_NATS_USER: 'worker',
      OPSTATE_NATS_PASSWORD: 'nats-pass-2',
    });
    const shown = JSON.stringify(redactConfiguration(config));
    for (const secret of ['db-pass-1', 'tok-in-url', 'nats-pass-2']) {
      expect(shown).not.toContain(secret);
    }
    expect(shown).toContain('postgres://app:***@db/app');
    expect(secretsOf(config).sort()).toEqual(['db-pass-1', 'nats-pass-2']);
  });

  it('takes a DATABASE_URL naming a primary and its standby, and hides its password', () => {
    const url = 'postgres://app:db,pass-3@pg-1:5432,pg-2:5432/app?target_session_attrs=read-write';
    const config = loadConfiguration({ DATABASE_URL: url });
    expect(config.database.url).toBe(url);
    expect(redactConfiguration(config).database.url).toBe(
      'postgres://app:***@pg-1:5432,pg-2:5432/app?target_session_attrs=read-write',
    );
    expect(secretsOf(config)).toEqual(['db,pass-3']);
    // Refused (not postgres://), its password is hidden whole, the comma in it too.
    const refused = refusal({ DATABASE_URL: 'mysql://app:db,pass-4@pg-1,pg-2/app' }).message;
    expect(refused).toContain("got 'mysql://app:***@pg-1,pg-2/app'");
    expect(refused).not.toMatch(/app:db|pass-4/);
  });
});

describe('createRuntime resolves its settings through the same configuration', () => {
  async function refusedAtStart(options: RuntimeOptions): Promise<OpstateError> {
    const err = await createRuntime({ logger: memoryLogger(), ...options }).then(
      async (runtime) => {
        await runtime.close();
        throw new Error('the runtime started');
      },
      (e: unknown) => e,
    );
    if (!(err instanceof OpstateError)) throw err;
    return err;
  }

  it.each([
    [{ NATS_URL: 'http://n1:4222' }, 'NATS_URL must be nats://host:port or tls://'],
    [{ OPSTATE_TIMING: 'soon' }, 'OPSTATE_TIMING must be a JSON object'],
    [{ OPSTATE_LOG_LEVEL: 'loud' }, 'OPSTATE_LOG_LEVEL must be trace | debug | info'],
    [{ OPSTATE_DATABASE_TLS: 'yes' }, 'OPSTATE_DATABASE_TLS must be disable | require'],
    [{ OPSTATE_NATS_TOKEN: 't', OPSTATE_NATS_CREDS_FILE: '/c' }, 'given 2 ways'],
  ])('refuses the environment %j at start, naming the variable', async (env, message) => {
    const err = await refusedAtStart({ env });
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain(message);
  });

  it('holds options to the same rules, and an option wins over its variable', async () => {
    const err = await refusedAtStart({ env: {}, natsUrl: 'http://n1:4222' });
    expect(err.message).toContain('the option natsUrl (as NATS_URL) must be nats://host:port');
    expect((await refusedAtStart({ env: {}, prefix: 'a.b' })).message).toContain(
      "the option prefix (as OPSTATE_PREFIX) must be letters, digits, '-' and '_'",
    );
    const config = loadConfiguration(
      {
        NATS_URL: 'not a url',
        OPSTATE_TIMING: 'soon',
        OPSTATE_NATS_TOKEN: 'env-token',
        OPSTATE_NATS_INSECURE: 'perhaps',
      },
      {},
      {
        natsUrl: 'nats://n1:4222',
        insecureNats: false,
        timing: { heartbeatIntervalMs: 500 },
        natsCredentials: { auth: { type: 'none' } },
      },
    );
    expect(config.nats).toEqual({ url: 'nats://n1:4222', auth: { type: 'none' }, insecure: false });
    expect(config.timing).toEqual({ heartbeatIntervalMs: 500 });
    const deadlines = loadConfiguration(
      { OPSTATE_DEADLINES: 'soon' },
      {},
      { deadlines: { transfer: 60_000 } },
    );
    expect(deadlines.deadlines).toEqual({ transfer: 60_000 });
    expect((await refusedAtStart({ env: {}, deadlines: { transfer: 0 } })).message).toBe(
      'the option deadlines (as OPSTATE_DEADLINES) must give each kind a whole number of milliseconds from 1 to 604800000 (7 days); the deadline of transfer must be a whole number of milliseconds from 1 to 604800000 (7 days); got 0',
    );
  });

  it('runs on what the environment says when the options leave it unset', async () => {
    const db = await createTestDatabase('opstate_config_env');
    const runtime = await createRuntime({
      logger: memoryLogger(),
      env: {
        DATABASE_URL: db.url,
        OPSTATE_PREFIX: 'from_env',
        OPSTATE_DB_SCHEMA: 'from_env_ops',
        OPSTATE_TIMING: '{"heartbeatIntervalMs":700,"heartbeatTimeoutMs":7000}',
        OPSTATE_DEADLINES: '{"transfer":"2h"}',
      },
    });
    try {
      expect(runtime.mode).toEqual({ database: 'postgres', transport: 'in-process' });
      expect(runtime.database.schema).toBe('from_env_ops');
      const [table] = await runtime.database.execute(
        "select to_regclass('from_env_ops.operation') is not null as present",
      );
      expect(table?.present).toBe(true);
      expect(runtime.timing.heartbeatIntervalMs).toBe(700);
      expect(runtime.timing.heartbeatTimeoutMs).toBe(7000);
      // The kinds named get theirs, the others keep the defaults.
      expect(runtime.timing.deadlines).toEqual({ ...DEFAULT_DEADLINES_MS, transfer: 7_200_000 });
      expect(runtime.startControlPlane().holder).toBeTruthy();
    } finally {
      await runtime.close();
      await dropTestDatabase(db);
    }
  });

  it('OPSTATE_QUEUE_MAX_IN_FLIGHT sets what each queue hands out unsettled at the broker, and unset brings the default back', async () => {
    const db = await createTestDatabase('opstate_config_inflight');
    const prefix = uniquePrefix('maxinflight').replaceAll('.', '_');
    const queue = queueName(defaultRoute(OperationKind.TRANSFER));
    const open = (env: Record<string, string>) =>
      createRuntime({
        logger: memoryLogger(),
        env: {
          DATABASE_URL: db.url,
          NATS_URL,
          OPSTATE_PREFIX: prefix,
          OPSTATE_NATS_INSECURE: '1',
          ...env,
        },
      });
    const maxAckPending = async (runtime: Runtime) => {
      const jsm = await jetstreamManager((runtime.transport as JetStreamTransport).connection);
      return (await jsm.consumers.info(`${prefix}_dispatch`, queue)).config.max_ack_pending;
    };
    try {
      const raised = await open({ OPSTATE_QUEUE_MAX_IN_FLIGHT: '5000' });
      expect(await maxAckPending(raised)).toBe(5000);
      await raised.close();
      const again = await open({});
      try {
        expect(await maxAckPending(again)).toBe(1000);
      } finally {
        await (again.transport as JetStreamTransport).destroy();
        await again.close();
      }
    } finally {
      await dropTestDatabase(db);
    }
  });
});
