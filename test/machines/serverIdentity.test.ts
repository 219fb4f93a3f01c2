import type { PeerCertificate } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { identityOf } from '../../machines/serverIdentity.ts';
import { urlHosts } from '../../persistence/databaseTls.ts';

/** The two fields Node's host check reads. */
const cert = (subjectaltname: string) =>
  ({ subject: { CN: 'server' }, subjectaltname }) as unknown as PeerCertificate;

describe('identityOf', () => {
  const forIp = cert('IP Address:127.0.0.1');
  const forLocalhost = cert('DNS:localhost');
  const forName = cert('DNS:db.example, IP Address:10.0.0.5');

  it.each([
    // hosts configured, the name TLS was told (localhost: it was told none), cert, accepted
    [['127.0.0.1'], 'localhost', forIp, true],
    [['127.0.0.1'], 'localhost', forLocalhost, false], // no longer good for any address
    [['localhost'], 'localhost', forLocalhost, true],
    [['localhost'], 'localhost', forIp, false],
    [['db.example'], 'db.example', forName, true],
    [['db.example'], 'db.example', forIp, false],
    [['10.0.0.5', '10.0.0.6'], 'localhost', forName, true], // any configured host will do
    [['10.0.0.7'], 'localhost', forName, false],
    [[], 'localhost', forLocalhost, true], // nothing configured: Node's own check
  ] as const)('hosts %j, told %s: accepted %s', (hosts, told, c, accepted) => {
    const error = identityOf(hosts)(told, c);
    if (accepted) expect(error).toBeUndefined();
    else expect(error).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  });
});

describe('urlHosts', () => {
  it.each([
    ['postgres://u:p@db.example:5432/app', ['db.example']],
    ['postgres://u@127.0.0.1/app?sslmode=verify-full', ['127.0.0.1']],
    ['postgres://u@db1:5432,db2/app', ['db1', 'db2']],
    ['postgres://u@[::1]:5432/app', ['::1']],
    ['postgresql://db.example', ['db.example']],
    ['postgres:///app', []],
  ])('%s → %j', (url, hosts) => {
    expect(urlHosts(url)).toEqual(hosts);
  });
});
