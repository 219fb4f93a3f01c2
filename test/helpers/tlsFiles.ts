import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** PEM files of a throwaway CA, a server certificate for 127.0.0.1/localhost and a client's. */
export interface TestCertificates {
  readonly dir: string;
  readonly caFile: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  await run('openssl', args, { cwd, timeout: 30_000 });
}

/**
 * A self-signed CA and two certificates it signs, made with `openssl` in a new temporary folder
 * (or `dir`): the server's (SAN `serverNames`, by default `IP:127.0.0.1` and `DNS:localhost`) and
 * a client's (CN `clientCn`).
 *
 * @example
 * ```ts
 * const certs = await makeTestCertificates();
 * // nats-server --tls --tlscert certs.serverCertFile --tlskey certs.serverKeyFile
 * ```
 */
export async function makeTestCertificates(
  dir?: string,
  clientCn = 'postgres',
  serverNames: readonly string[] = ['IP:127.0.0.1', 'DNS:localhost'],
): Promise<TestCertificates> {
  const at = dir ?? (await mkdtemp(join(tmpdir(), 'opstate-tls-')));
  const days = ['-days', '2'];
  await openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      ...days,
      '-subj',
      '/CN=opstate test CA',
    ],
    at,
  );
  await writeFile(
    join(at, 'server.ext'),
    `subjectAltName=${serverNames.join(',')}\nextendedKeyUsage=serverAuth\n`,
  );
  await writeFile(join(at, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, cn] of [
    ['server', 'opstate test server'],
    ['client', clientCn],
  ] as const) {
    await openssl(
      [
        'req',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.csr`,
        '-subj',
        `/CN=${cn}`,
      ],
      at,
    );
    await openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${name}.pem`,
        ...days,
        '-extfile',
        `${name}.ext`,
      ],
      at,
    );
  }
  return {
    dir: at,
    caFile: join(at, 'ca.pem'),
    serverCertFile: join(at, 'server.pem'),
    serverKeyFile: join(at, 'server.key'),
    clientCertFile: join(at, 'client.pem'),
    clientKeyFile: join(at, 'client.key'),
  };
}
