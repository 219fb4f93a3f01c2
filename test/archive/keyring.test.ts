import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createArchiveCommand } from '../../cli/commands/archive.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import {
  type ArchiveCipher,
  archiveCipherFromEnv,
  loadArchiveCipher,
  loadArchiveKeyring,
  sealedKeyId,
} from '../../stages/archiveCipher.ts';
import { type ArchiveWorld, startArchiveWorld } from './world.ts';

/**
 * Key rotation against a live deployment on the real Postgres and NATS with real key files: an
 * archive sealed under key A still verifies and restores once key B seals and A is a read key;
 * with A gone, verify names A's key id, and `archive rekey --dry-run` reports what each key
 * sealed and what no configured key opens.
 */
let w: ArchiveWorld;
let keyA: string;
let keyB: string;
let current: ArchiveCipher;
const saved = {
  key: process.env.OPSTATE_ARCHIVE_KEY_FILE,
  read: process.env.OPSTATE_ARCHIVE_READ_KEY_FILES,
};
/** The worker's cipher: whatever the deployment is configured with at the time of a seal. */
const rotating: ArchiveCipher = {
  get keyId() {
    return current.keyId;
  },
  seal: (plain) => current.seal(plain),
  open: (sealed) => current.open(sealed),
};

function capture() {
  const lines: string[] = [];
  return {
    lines,
    text: () => lines.join('\n'),
    io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) },
  };
}
const shared = () => Promise.resolve({ ...w.runtime.database, close: async () => {} });
const archive = () => createArchiveCommand(shared);

function configure(sealing: string, read: string[]): void {
  process.env.OPSTATE_ARCHIVE_KEY_FILE = sealing;
  if (read.length === 0) delete process.env.OPSTATE_ARCHIVE_READ_KEY_FILES;
  else process.env.OPSTATE_ARCHIVE_READ_KEY_FILES = read.join(',');
}

beforeAll(async () => {
  w = await startArchiveWorld();
  keyA = join(w.dir, 'a.key');
  keyB = join(w.dir, 'b.key');
  await writeFile(keyA, randomBytes(32).toString('hex'), { mode: 0o600 });
  await writeFile(keyB, randomBytes(32), { mode: 0o600 });
  current = loadArchiveCipher(keyA);
  w.startArchiver({ cipher: rotating });
});
afterAll(async () => {
  for (const [k, v] of [
    ['OPSTATE_ARCHIVE_KEY_FILE', saved.key],
    ['OPSTATE_ARCHIVE_READ_KEY_FILES', saved.read],
  ] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await w?.close();
});

describe('archive keyring', () => {
  it('after a rotation an archive sealed under the old key verifies and restores; without it, verify names the missing key; rekey --dry-run reports each key', async () => {
    const idA = loadArchiveCipher(keyA).keyId;
    const idB = loadArchiveCipher(keyB).keyId;
    expect(idA).not.toBe(idB);

    const pkgA = await w.addPackage();
    const underA = await w.submitArchive(pkgA);
    await w.waitStatus(underA, 'COMPLETED');

    // Rotation: B seals from now on, A only opens what it sealed.
    configure(keyB, [keyA]);
    current = archiveCipherFromEnv() as ArchiveCipher;
    expect(current.keyId).toBe(idB);
    expect(current.keyIds).toEqual([idB, idA]);
    const pkgB = await w.addPackage();
    const underB = await w.submitArchive(pkgB);
    await w.waitStatus(underB, 'COMPLETED');

    const records = new ArchiveRecordRepository(w.runtime.database);
    const uploadedKey = async (id: string) =>
      (await records.list(id)).find((r) => r.state === 'UPLOADED')?.keyId;
    expect(await uploadedKey(underA)).toBe(idA);
    expect(await uploadedKey(underB)).toBe(idB);
    const stored = async (name: string) => readFile(join(w.archive.storageRoot, `${name}.tar`));
    expect(sealedKeyId(await stored(pkgA.name))).toBe(idA);
    expect(sealedKeyId(await stored(pkgB.name))).toBe(idB);

    for (const id of [underA, underB]) {
      const v = capture();
      expect(await archive().run(['verify', id], v.io), v.text()).toBe(0);
      expect(v.text()).toMatch(/OK: the object reads back as written; 3 members match/);
    }
    const to = await mkdtemp(join(w.dir, 'restore-'));
    const r = capture();
    expect(await archive().run(['restore', underA, '--to', to], r.io), r.text()).toBe(0);
    for (const [name, data] of Object.entries(pkgA.files)) {
      expect(await readFile(join(to, name))).toEqual(data);
    }

    const both = capture();
    expect(await archive().run(['rekey', '--dry-run', '--json'], both.io), both.text()).toBe(0);
    const report = JSON.parse(both.text());
    expect(report.sealingKeyId).toBe(idB);
    expect(
      report.keys.map((k: { keyId: string; count: number; seals: boolean }) => [
        k.keyId,
        k.count,
        k.seals,
      ]),
    ).toEqual([
      [idB, 1, true],
      [idA, 1, false],
    ]);
    expect(report.keys[1].archives).toEqual([{ operationId: underA, key: `${pkgA.name}.tar` }]);
    expect(report.unopenable.count).toBe(0);

    // A is dropped from the configuration: its archive no longer opens, and both tools say why.
    configure(keyB, []);
    const denied = capture();
    expect(await archive().run(['verify', underA], denied.io)).toBe(2);
    expect(denied.text()).toContain(`sealed with key ${idA}`);
    const stillB = capture();
    expect(await archive().run(['verify', underB], stillB.io), stillB.text()).toBe(0);
    const restoreDenied = capture();
    const to2 = await mkdtemp(join(w.dir, 'restore-'));
    expect(await archive().run(['restore', underA, '--to', to2], restoreDenied.io)).toBe(2);
    expect(restoreDenied.text()).toContain(`sealed with key ${idA}`);
    expect(await readdir(to2)).toEqual([]);

    const onlyB = capture();
    expect(await archive().run(['rekey', '--dry-run'], onlyB.io), onlyB.text()).toBe(1);
    expect(onlyB.text()).toContain(`key ${idB} (seals new archives): sealed 1 archive(s)`);
    expect(onlyB.text()).toContain(`key ${idA} (NOT CONFIGURED): sealed 1 archive(s)`);
    expect(onlyB.text()).toContain('NO CONFIGURED KEY OPENS 1 archive(s):');
    expect(onlyB.text()).toContain(`${underA}  ${pkgA.name}.tar  (key ${idA})`);

    const rewrite = capture();
    expect(await archive().run(['rekey'], rewrite.io)).toBe(2);
    expect(rewrite.text()).toContain('only `opstate archive rekey --dry-run`');
  });

  it('refuses a bad keyring with CONFIG: missing file, wrong size, the same key twice, read keys without a sealing key', async () => {
    const dir = await mkdtemp(join(w.dir, 'bad-'));
    const short = join(dir, 'short.key');
    await writeFile(short, randomBytes(20).toString('hex'), { mode: 0o600 });
    const copyOfA = join(dir, 'a-again.key');
    await writeFile(copyOfA, await readFile(keyA), { mode: 0o600 });
    const cases: [Record<string, string>, RegExp][] = [
      [
        { OPSTATE_ARCHIVE_KEY_FILE: keyB, OPSTATE_ARCHIVE_READ_KEY_FILES: join(dir, 'none') },
        /cannot read archive key file .*none/,
      ],
      [
        { OPSTATE_ARCHIVE_KEY_FILE: keyB, OPSTATE_ARCHIVE_READ_KEY_FILES: `${keyA},${short}` },
        /short\.key must hold a 256-bit key/,
      ],
      [
        { OPSTATE_ARCHIVE_KEY_FILE: keyB, OPSTATE_ARCHIVE_READ_KEY_FILES: `${keyA}, ${copyOfA}` },
        /hold the same key/,
      ],
      [
        { OPSTATE_ARCHIVE_KEY_FILE: keyA, OPSTATE_ARCHIVE_READ_KEY_FILES: keyA },
        /hold the same key/,
      ],
      [{ OPSTATE_ARCHIVE_READ_KEY_FILES: keyA }, /OPSTATE_ARCHIVE_KEY_FILE .* is not set/],
    ];
    for (const [env, message] of cases) {
      let thrown: unknown;
      try {
        archiveCipherFromEnv(env);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, JSON.stringify(env)).toMatchObject({ code: OpstateErrorCode.CONFIG });
      expect((thrown as Error).message).toMatch(message);
    }
    // The single-key setting alone is unchanged: one key, sealing and opening.
    const single = archiveCipherFromEnv({ OPSTATE_ARCHIVE_KEY_FILE: keyA }) as ArchiveCipher;
    expect(single.keyId).toBe(loadArchiveCipher(keyA).keyId);
    const ring = loadArchiveKeyring(keyB, [keyA]);
    expect(ring.open(single.seal(Buffer.from('sealed under A')))).toEqual(
      Buffer.from('sealed under A'),
    );
    expect(String(JSON.stringify(ring))).not.toContain((await readFile(keyA, 'utf8')).trim());
  });
});
