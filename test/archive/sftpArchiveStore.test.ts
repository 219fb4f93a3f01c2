import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmod, copyFile, readdir, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { archiveStoreAt } from '../../stages/registerArchiveStore.ts';
import {
  SFTP_HOST_KEY_ENV,
  SFTP_KEY_FILE_ENV,
  SftpArchiveStore,
} from '../../stages/SftpArchiveStore.ts';
import { PrivateSshd } from '../helpers/privateSshd.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { archiveStoreContract } from './storeContract.ts';

/**
 * The SFTP archive store against a real OpenSSH server of its own (a private sshd on a free
 * loopback port, internal-sftp): the shared store contract, run through the registry's `sftp:`
 * scheme as an operator's `opstate archive verify` would reach it, and what is the SFTP store's
 * own — its storage root, its credentials, its host key check, its temporaries.
 */
let sshd: PrivateSshd;
const saved = { key: process.env[SFTP_KEY_FILE_ENV], host: process.env[SFTP_HOST_KEY_ENV] };

beforeAll(async () => {
  sshd = await PrivateSshd.start();
  process.env[SFTP_KEY_FILE_ENV] = sshd.clientKeyFile;
  process.env[SFTP_HOST_KEY_ENV] = sshd.hostKeySha256;
}, 60_000);
afterAll(async () => {
  for (const [name, value] of [
    [SFTP_KEY_FILE_ENV, saved.key],
    [SFTP_HOST_KEY_ENV, saved.host],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await sshd?.stop();
});

archiveStoreContract('sftp (private OpenSSH server)', async () => {
  const storageRoot = sshd.url(join(sshd.root, `contract-${randomUUID().slice(0, 8)}`));
  return { store: archiveStoreAt(storageRoot), storageRoot, cleanup: async () => {} };
});

async function collect(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

describe('the sftp store', () => {
  const folder = () => join(sshd.root, `own-${randomUUID().slice(0, 8)}`);

  it('a storage root with a password, no user, a relative folder or a query is CONFIG', () => {
    for (const root of [
      'sftp://u:secret@127.0.0.1/lta',
      'sftp://127.0.0.1/lta',
      'sftp://u@127.0.0.1',
      'sftp://u@127.0.0.1/lta/../etc',
      'sftp://u@127.0.0.1/lta?x=1',
      'sftp://u@127.0.0.1/lta/%2e%2e/etc',
      'sftp://u@127.0.0.1/',
      'sftp:lta',
    ]) {
      expect(() => archiveStoreAt(root), root).toThrow(
        expect.objectContaining({ code: OpstateErrorCode.CONFIG }),
      );
    }
    expect(() => archiveStoreAt('sftp://u:secret@127.0.0.1/lta')).toThrow(
      expect.not.objectContaining({ message: expect.stringContaining('secret') }),
    );
    expect(archiveStoreAt('sftp://lta@10.0.0.5/srv/lta/').describe('k/o.tar')).toBe(
      'sftp://lta@10.0.0.5:22/srv/lta/k/o.tar',
    );
  });

  it('refuses a key file others can read, a missing key or fingerprint, and a server with another host key; writes nothing', async () => {
    const dir = folder();
    const open = join(sshd.dir, `open-${randomUUID().slice(0, 8)}`);
    await copyFile(sshd.clientKeyFile, open);
    await chmod(open, 0o644);
    const cases: [string, ConstructorParameters<typeof SftpArchiveStore>[1], string][] = [
      ['readable key', { privateKeyFile: open }, 'open to every user'],
      ['no key', { privateKeyFile: '' }, SFTP_KEY_FILE_ENV],
      ['no fingerprint', { hostKeySha256: '' }, SFTP_HOST_KEY_ENV],
      [
        'another host key',
        { hostKeySha256: 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' },
        'refused',
      ],
    ];
    for (const [name, options, says] of cases) {
      const store = new SftpArchiveStore(sshd.url(dir), options);
      await expect(store.putIfAbsent('k/o.tar', [Buffer.from('x')]), name).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining(says),
      });
    }
    await expect(readdir(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a symlink at a key is neither read nor followed', async () => {
    const dir = folder();
    const store = archiveStoreAt(sshd.url(dir));
    await store.putIfAbsent('real.tar', [Buffer.from('real')]);
    await symlink(join(dir, 'real.tar'), join(dir, 'link.tar'));
    for (const call of [() => store.read('link.tar'), () => store.stat('link.tar')]) {
      await expect(call()).rejects.toMatchObject({ code: OpstateErrorCode.BAD_INPUT });
    }
  });

  it('a put removes the stale temporaries of its key, and keeps fresh ones (a writer still at work)', async () => {
    const dir = folder();
    const store = archiveStoreAt(sshd.url(dir));
    await store.putIfAbsent('first.tar', [Buffer.from('makes the folder')]);
    const stale = join(dir, 'k.tar.partial-0badf00d');
    const fresh = join(dir, 'k.tar.partial-00c0ffee');
    await writeFile(stale, 'half');
    await writeFile(fresh, 'half');
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    await utimes(stale, twoHoursAgo, twoHoursAgo);
    const put = await store.putIfAbsent('k.tar', [Buffer.from('whole')]);
    expect(put.created).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(['first.tar', 'k.tar', 'k.tar.partial-00c0ffee']);
    expect(
      (await collect((await store.read('k.tar'))?.body ?? (async function* () {})())).toString(),
    ).toBe('whole');
  });

  it('a writer process killed (SIGKILL) mid-put leaves the key free and only its temporary; the next put creates the object whole', async () => {
    const dir = folder();
    const storageRoot = sshd.url(dir);
    const fixture = fileURLToPath(new URL('./fixtures/sftpWriterKilledMidPut.ts', import.meta.url));
    const writer = spawn(process.execPath, ['--import', 'tsx', fixture, storageRoot, 'k/o.tar'], {
      env: { ...process.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let said = '';
    writer.stdout.on('data', (d: Buffer) => {
      said += d.toString();
    });
    writer.stderr.on('data', (d: Buffer) => {
      said += d.toString();
    });
    const exited = new Promise((resolve) => writer.once('exit', resolve));
    const partialSize = async () => {
      const names = await readdir(join(dir, 'k')).catch(() => [] as string[]);
      const partial = names.find((n) => n.startsWith('o.tar.partial-'));
      return partial === undefined ? 0 : (await stat(join(dir, 'k', partial))).size;
    };
    await waitFor(
      async () => said.includes('wrote') && (await partialSize()) === 65_536,
      'the writer has 64 KiB in its temporary',
      60_000,
      50,
      () => said,
    );
    writer.kill('SIGKILL');
    await exited;
    const store = archiveStoreAt(storageRoot);
    expect(await store.stat('k/o.tar')).toBeNull();
    expect(await store.read('k/o.tar')).toBeNull();
    expect((await readdir(join(dir, 'k'))).filter((n) => n === 'o.tar')).toEqual([]);
    const whole = Buffer.alloc(100_000, 9);
    expect((await store.putIfAbsent('k/o.tar', [whole])).created).toBe(true);
    const back = await store.read('k/o.tar');
    expect((await collect(back?.body ?? (async function* () {})())).equals(whole)).toBe(true);
  }, 90_000);
});

describe('without the ssh2 package', () => {
  it('an sftp: store says to install it (CONFIG), and writes nothing', async () => {
    vi.resetModules();
    vi.doMock('ssh2', () => {
      throw new Error("Cannot find package 'ssh2'");
    });
    try {
      const { SftpArchiveStore: Fresh } = await import('../../stages/SftpArchiveStore.ts');
      const dir = join(sshd.root, `no-ssh2-${randomUUID().slice(0, 8)}`);
      await expect(
        new Fresh(sshd.url(dir)).putIfAbsent('k.tar', [Buffer.from('x')]),
      ).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining('npm install ssh2'),
      });
      await expect(readdir(dir)).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      vi.doUnmock('ssh2');
      vi.resetModules();
    }
  });
});
