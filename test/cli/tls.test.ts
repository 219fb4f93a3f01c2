import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpstateError } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../../runtime/Runtime.ts';
import { createJetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { archiveOperation, HANDLERS } from '../actors/harness.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { PrivatePostgres, postgresIds } from '../helpers/privateServers.ts';
import { makeTestCertificates, type TestCertificates } from '../helpers/tlsFiles.ts';
import { NatsServerProcess, waitFor } from '../transport/helpers.ts';

/**
 * A private Postgres with `ssl=on` that takes TLS connections only, with a client certificate
 * signed by its CA, and a private nats-server with TLS that verifies client certificates, both on
 * a throwaway CA made with openssl: opstate connects with the configured CA and client
 * certificate, and without them is refused at once (no waiting) with an error that says what
 * failed and what to set, never a secret.
 */
let pg: PrivatePostgres;
let nats: NatsServerProcess;
let certs: TestCertificates;
const PASSWORD = `pw-${Math.random().toString(36).slice(2, 12)}`;
const children: { proc: ChildProcess; output: string[] }[] = [];

beforeAll(async () => {
  pg = await PrivatePostgres.create();
  const dir = join(pg.dir, 'tls');
  await mkdir(dir);
  // For 127.0.0.1 only: `localhost` reaches the same servers under a name the certificate lacks.
  certs = await makeTestCertificates(dir, 'postgres', ['IP:127.0.0.1']);
  const { uid, gid } = await postgresIds();
  await chown(dir, uid, gid);
  for (const file of [certs.caFile, certs.serverCertFile, certs.serverKeyFile]) {
    await chown(file, uid, gid);
    await chmod(file, 0o600);
  }
  const hba = join(pg.dir, 'data', 'pg_hba.conf');
  await writeFile(
    hba,
    'local all all trust\nhostssl all all 127.0.0.1/32 trust clientcert=verify-ca\nhost all all 127.0.0.1/32 reject\n',
  );
  await chown(hba, uid, gid);
  await pg.start({
    ssl: 'on',
    ssl_cert_file: certs.serverCertFile,
    ssl_key_file: certs.serverKeyFile,
    ssl_ca_file: certs.caFile,
  });
  const conf = join(certs.dir, 'nats.conf');
  await writeFile(
    conf,
    `tls {\n  cert_file: "${certs.serverCertFile}"\n  key_file: "${certs.serverKeyFile}"\n  ca_file: "${certs.caFile}"\n  verify: true\n}\n`,
  );
  nats = await NatsServerProcess.create();
  await nats.start({ args: ['-c', conf] });
}, 120_000);

afterAll(async () => {
  for (const { proc } of children) {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    }
  }
  await nats?.dispose();
  await pg?.dispose();
});

const databaseUrl = () => {
  const url = new URL(pg.url('postgres'));
  url.password = PASSWORD; // trust auth ignores it: it is there to be kept out of every line
  return url.toString();
};

/** The environment of a CLI process with every TLS setting, less those named in `without`. */
function tlsEnv(without: string[] = []): Record<string, string> {
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl(),
    OPSTATE_DATABASE_TLS: 'verify-full',
    OPSTATE_DATABASE_CA_FILE: certs.caFile,
    OPSTATE_DATABASE_CERT_FILE: certs.clientCertFile,
    OPSTATE_DATABASE_KEY_FILE: certs.clientKeyFile,
    NATS_URL: `tls://127.0.0.1:${nats.port}`,
    OPSTATE_NATS_CA_FILE: certs.caFile,
    OPSTATE_NATS_CERT_FILE: certs.clientCertFile,
    OPSTATE_NATS_KEY_FILE: certs.clientKeyFile,
  };
  for (const v of without) delete env[v];
  return env;
}

function spawnCli(args: string[], env: Record<string, string>) {
  const proc = spawn(process.execPath, opstateArgs(args), {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  proc.stdout?.on('data', (b: Buffer) => output.push(b.toString()));
  proc.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
  children.push({ proc, output });
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  return { proc, exited, text: () => output.join('') };
}

const withTls = (): RuntimeOptions => ({
  databaseUrl: databaseUrl(),
  databaseTls: {
    mode: 'verify-full',
    caFile: certs.caFile,
    certFile: certs.clientCertFile,
    keyFile: certs.clientKeyFile,
  },
  natsUrl: nats.url,
  natsCredentials: {
    tls: { caFile: certs.caFile, certFile: certs.clientCertFile, keyFile: certs.clientKeyFile },
  },
  // The private server checks certificates but has no users: it takes any client with one.
  insecureNats: true,
  env: {},
});

async function refusal(options: RuntimeOptions): Promise<OpstateError> {
  const logger = memoryLogger();
  const err = await createRuntime({ logger, ...options }).then(
    async (r) => {
      await r.close();
      throw new Error('the runtime started');
    },
    (e: unknown) => e,
  );
  if (!(err instanceof OpstateError)) throw err;
  expect(JSON.stringify(logger.lines)).not.toContain(PASSWORD);
  return err;
}

describe('TLS to Postgres and NATS', () => {
  it('runs an operation through a runtime and a worker process that trust the CA and present client certificates', async () => {
    const plane: Runtime = await createRuntime({ ...withTls(), logger: memoryLogger() });
    try {
      plane.startControlPlane();
      const worker = spawnCli(
        [
          ...[
            'worker',
            '--kinds',
            'long_term_archive',
            '--handlers',
            HANDLERS,
            '--id',
            'tls-worker',
          ],
          // its archive's locations are registered after it starts: found within half a second
          ...['--discovery-interval-ms', '500'],
        ],
        tlsEnv(),
      );
      await waitFor(
        () => worker.text().includes('started for'),
        'the worker to start',
        60_000,
        50,
        worker.text,
      );
      const { id } = await archiveOperation({ runtime: plane });
      await waitFor(
        async () => (await plane.store.load(id)).status === 'COMPLETED',
        'the operation to complete on the TLS worker',
        30_000,
        50,
        worker.text,
      );
      const [row] = await plane.database.execute<{ ssl: boolean }>(
        'select ssl from pg_stat_ssl where pid = pg_backend_pid()',
      );
      expect(row?.ssl).toBe(true);
      const config = spawnCli(['config'], tlsEnv());
      expect(await config.exited).toBe(0);
      expect(config.text()).toMatch(
        /database +postgres:\/\/postgres:\*\*\*@127\.0\.0\.1.*\(TLS verify-full\)/,
      );
      expect(config.text()).toMatch(/transport +tls:\/\/127\.0\.0\.1:\d+ \(auth none, TLS\)/);
      for (const c of [worker, config]) {
        expect(c.text()).not.toContain(PASSWORD);
        expect(c.text()).not.toContain('PRIVATE KEY');
      }
    } finally {
      await plane.close();
    }
  });

  it('refuses Postgres without the CA or the client certificate, at once and saying what to set', async () => {
    const noCa = await refusal({
      ...withTls(),
      databaseTls: { mode: 'verify-full' },
    });
    expect(noCa.code).toBe('CONFIG');
    expect(noCa.message).toMatch(
      /^Postgres's TLS certificate does not verify \(SELF_SIGNED_CERT_IN_CHAIN: .*\); set OPSTATE_DATABASE_CA_FILE/,
    );
    const noCert = await refusal({
      ...withTls(),
      databaseTls: { mode: 'verify-full', caFile: certs.caFile },
    });
    expect(noCert.message).toContain('Postgres refused the connection');
    expect(noCert.message).toContain('OPSTATE_DATABASE_CERT_FILE');
    const plain = await refusal({ ...withTls(), databaseTls: { mode: 'disable' } });
    expect(plain.message).toContain('set OPSTATE_DATABASE_TLS to require or verify-full');

    // A control plane that waits for unreachable servers does not wait for this: it exits 1.
    const plane = spawnCli(['control-plane'], tlsEnv(['OPSTATE_DATABASE_CA_FILE']));
    expect(await plane.exited).toBe(2); // a configuration error
    expect(plane.text()).toContain("Postgres's TLS certificate does not verify");
    expect(plane.text()).not.toContain(PASSWORD);
  });

  it('refuses NATS without the CA at once, and names the client certificate when the server waits for one', async () => {
    const noCa = await refusal({ ...withTls(), natsCredentials: { tls: {} } });
    expect(noCa.code).toBe('CONFIG');
    expect(noCa.message).toMatch(
      /^NATS's TLS certificate does not verify \(UNABLE_TO_VERIFY_LEAF_SIGNATURE: .*\); set OPSTATE_NATS_CA_FILE/,
    );
    const worker = spawnCli(
      ['worker', '--kinds', 'long_term_archive', '--handlers', HANDLERS],
      tlsEnv(['OPSTATE_NATS_CA_FILE']),
    );
    expect(await worker.exited).toBe(2);
    expect(worker.text()).toContain("NATS's TLS certificate does not verify");

    const noCert = await createJetStreamTransport({
      servers: nats.url,
      credentials: { tls: { caFile: certs.caFile } },
      connectTimeoutMs: 2000,
    }).then(
      async (t) => {
        await t.close();
        throw new Error('connected without a client certificate');
      },
      (e: unknown) => e as Error,
    );
    expect(noCert.message).toContain('set OPSTATE_NATS_CERT_FILE and OPSTATE_NATS_KEY_FILE');
  });
  it('refuses servers whose certificate is for another host name, at once and saying so', async () => {
    const url = new URL(databaseUrl());
    url.hostname = 'localhost';
    const postgresByName = await refusal({ ...withTls(), databaseUrl: url.toString() });
    expect(postgresByName.code).toBe('CONFIG');
    expect(postgresByName.message).toMatch(
      /^Postgres's TLS certificate does not verify \(ERR_TLS_CERT_ALTNAME_INVALID: .*localhost.*\);.*name the host the certificate is for/,
    );
    const natsByName = await refusal({ ...withTls(), natsUrl: `tls://localhost:${nats.port}` });
    expect(natsByName.code).toBe('CONFIG');
    expect(natsByName.message).toMatch(
      /^NATS's TLS certificate does not verify \(ERR_TLS_CERT_ALTNAME_INVALID: .*localhost.*\);.*name the host the certificate is for/,
    );
  });
});
