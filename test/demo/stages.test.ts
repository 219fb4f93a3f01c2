import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { readPackage, sha256, writePackage } from '../../stages/packageFormat.ts';
import { putOnce } from '../../stages/storage.ts';
import { packTar, unpackTar } from '../../stages/tar.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'opstate-stages-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const members = [
  { name: 'scan_0001.fits', data: Buffer.from('first\n') },
  { name: 'empty.dat', data: Buffer.alloc(0) },
  { name: 'block.bin', data: Buffer.alloc(512, 7) },
];

describe('tar and the package format', () => {
  it('round-trips members, and the same members give the same bytes', () => {
    const tar = packTar(members);
    expect(unpackTar(tar).map((m) => [m.name, Buffer.from(m.data).toString('hex')])).toEqual(
      members.map((m) => [m.name, m.data.toString('hex')]),
    );
    expect(sha256(packTar(members))).toBe(sha256(tar));
  });

  it('writes archives the system tar can list', async () => {
    const path = join(dir, 'p.tar');
    await writeFile(path, writePackage(members));
    let listing: string;
    try {
      listing = execFileSync('tar', ['-tf', path], { encoding: 'utf8' });
    } catch {
      return; // no tar binary here: the round trip above still holds
    }
    expect(listing.trim().split('\n')).toEqual([
      'MANIFEST.json',
      'scan_0001.fits',
      'empty.dat',
      'block.bin',
    ]);
  });

  it('refuses a package whose member differs from its manifest', () => {
    const bytes = writePackage(members);
    const { members: read } = readPackage(bytes);
    expect(read.map((m) => m.name)).toEqual(members.map((m) => m.name));
    const tampered = Buffer.from(bytes);
    const at = tampered.indexOf('first\n');
    tampered.write('FIRST\n', at);
    expect(() => readPackage(tampered)).toThrow(/do not match its manifest/);
  });
});

describe('putOnce (create-if-absent)', () => {
  it('creates, then finds identical bytes and leaves them; different bytes are a conflict, never an overwrite', async () => {
    const path = join(dir, 'archive', 'obs.tar');
    expect((await putOnce(path, Buffer.from('v1'))).outcome).toBe('created');
    expect((await putOnce(path, Buffer.from('v1'))).outcome).toBe('identical');
    await expect(putOnce(path, Buffer.from('v2'))).rejects.toMatchObject({
      code: OpstateErrorCode.CONFLICT,
      retryable: false,
    });
    expect((await readFile(path)).toString()).toBe('v1');
  });
});
