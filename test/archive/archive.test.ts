import { randomBytes } from 'node:crypto';
import { mkdir, readFile, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createArchiveCommand } from '../../cli/commands/archive.ts';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { replan } from '../../runtime/replan.ts';
import { isSealed, loadArchiveCipher } from '../../stages/archiveCipher.ts';
import { MANIFEST_NAME, readPackage, sha256, writePackage } from '../../stages/packageFormat.ts';
import { restorePackage } from '../../stages/restoreArchive.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import { type ArchiveWorld, startArchiveWorld } from './world.ts';

/**
 * The archive half on the real Postgres and NATS, with the reference handler on real files:
 * encryption at rest without a key ever leaving the key file, hostile member names refused at
 * packaging and at restore, an object already at the key (never overwritten), a truncated object
 * (never VERIFIED), a stale plan replaced by an operator, and the independent verify and restore.
 */
let w: ArchiveWorld;
let keyHex: string;
const before = new Map<string, (ctx: HandlerContext) => Promise<void>>();
const afterUpload = new Map<string, (path: string) => Promise<void>>();

const packageOf = async (ctx: HandlerContext) =>
  String((await ctx.inspect()).fields.rawDataPackageId);

function capture() {
  const lines: string[] = [];
  return { lines, io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) } };
}
const shared = () => Promise.resolve({ ...w.runtime.database, close: async () => {} });

beforeAll(async () => {
  w = await startArchiveWorld();
  keyHex = randomBytes(32).toString('hex');
  await writeFile(join(w.dir, 'archive.key'), keyHex, { mode: 0o600 });
  process.env.OPSTATE_ARCHIVE_KEY_FILE = join(w.dir, 'archive.key');
  w.startArchiver({
    cipher: loadArchiveCipher(join(w.dir, 'archive.key')),
    faults: {
      async beforeUpload(ctx) {
        await before.get(await packageOf(ctx))?.(ctx);
      },
      async afterUpload(ctx, path) {
        await afterUpload.get(await packageOf(ctx))?.(path);
      },
    },
  });
});
afterAll(async () => {
  delete process.env.OPSTATE_ARCHIVE_KEY_FILE;
  await w?.close();
});

describe('long-term archive (reference handler)', () => {
  it('encrypts at rest with AES-256-GCM; the key appears in no record, log line or inspect output', async () => {
    const pkg = await w.addPackage();
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'COMPLETED');
    const records = await new ArchiveRecordRepository(w.runtime.database).list(id);
    expect(records.map((r) => r.state)).toEqual(['PLANNED', 'UPLOADED', 'READ_BACK', 'VERIFIED']);
    const cipher = loadArchiveCipher(join(w.dir, 'archive.key'));
    const stored = await readFile(join(w.archive.storageRoot, `${pkg.name}.tar`));
    expect(isSealed(stored)).toBe(true);
    expect(records[1]).toMatchObject({
      encrypted: true,
      keyId: cipher.keyId,
      objectSha256: sha256(stored),
    });
    const { members } = readPackage(cipher.open(stored));
    expect(members.map((m) => [m.name, Buffer.from(m.data).toString()])).toEqual(
      Object.entries(pkg.files).map(([n, d]) => [n, d.toString()]),
    );
    const inspect = capture();
    expect(await createInspectCommand(shared).run([id, '--json'], inspect.io)).toBe(0);
    const everything = [
      JSON.stringify(await w.runtime.database.execute('select * from archive_record')),
      JSON.stringify(w.logger.lines),
      inspect.lines.join('\n'),
      JSON.stringify(cipher),
    ].join('\n');
    expect(everything).toContain(cipher.keyId);
    expect(everything).not.toContain(keyHex);
    expect(everything).not.toContain(Buffer.from(keyHex, 'hex').toString('base64'));
    expect(JSON.parse(inspect.lines.join('\n')).resume.archive).toMatchObject({
      encrypted: true,
      keyId: cipher.keyId,
      verification: 'VERIFIED',
    });
  });

  it('refuses hostile member names at packaging (.., absolute, NUL): nothing is written, the source stays', async () => {
    for (const name of ['../escape.fits', '/etc/passwd', 'nul\u0000byte.fits', '..']) {
      const pkg = await w.addPackage();
      const manifest = JSON.parse(await readFile(join(pkg.folder, MANIFEST_NAME), 'utf8'));
      manifest.members[0].name = name;
      await writeFile(join(pkg.folder, MANIFEST_NAME), JSON.stringify(manifest));
      const id = await w.submitArchive(pkg);
      await w.waitStatus(id, 'FAILED');
      const view = await w.runtime.get(id);
      expect(view.lastError).toMatchObject({ code: OpstateErrorCode.BAD_INPUT, retryable: false });
      expect(view.lastError?.message).toMatch(/member name .* refused/);
      expect(await new ArchiveRecordRepository(w.runtime.database).list(id)).toEqual([]);
      await expect(stat(join(w.archive.storageRoot, `${pkg.name}.tar`))).rejects.toMatchObject({
        code: 'ENOENT',
      });
      expect((await stat(join(pkg.folder, 'scan_0001.fits'))).isFile()).toBe(true);
    }
  });

  it('refuses hostile member names at restore, writing nothing outside the folder', async () => {
    const evil = writePackage([{ name: 'ok.fits', data: Buffer.from('fine') }]);
    // Rename the member in the tar header by hand (the writer itself refuses such names).
    const hostile = Buffer.from(evil);
    const manifestSize = Number.parseInt(hostile.toString('ascii', 124, 135), 8);
    const second = 512 + Math.ceil(manifestSize / 512) * 512;
    hostile.fill(0, second, second + 100);
    hostile.write('../x.fits', second, 'utf8');
    hostile.fill(0x20, second + 148, second + 156);
    let sum = 0;
    for (let i = second; i < second + 512; i++) sum += hostile[i] as number;
    hostile.write(`${sum.toString(8).padStart(6, '0')}\0 `, second + 148, 'ascii');
    const dir = join(w.dir, 'restore-hostile');
    await expect(restorePackage(hostile, [], dir)).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
    });
    await expect(stat(join(w.dir, 'x.fits'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an object already at the key with other content is a CONFLICT, never overwritten; the source is kept', async () => {
    const pkg = await w.addPackage();
    const foreign = Buffer.from('someone else wrote this object\n');
    await mkdir(w.archive.storageRoot, { recursive: true });
    await writeFile(join(w.archive.storageRoot, `${pkg.name}.tar`), foreign);
    w.startDeleter();
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'FAILED');
    const view = await w.runtime.get(id);
    expect(view.lastError).toMatchObject({ code: OpstateErrorCode.CONFLICT, retryable: false });
    expect(await readFile(join(w.archive.storageRoot, `${pkg.name}.tar`))).toEqual(foreign);
    const states = (await new ArchiveRecordRepository(w.runtime.database).list(id)).map(
      (r) => r.state,
    );
    expect(states).toEqual(['PLANNED', 'CONFLICT']);
    const out = capture();
    await createInspectCommand(shared).run([id], out.io);
    expect(out.lines.join('\n')).toMatch(
      /next safe action: blocked: another object is at the archive key and was never overwritten — source kept/,
    );
    expect((await new CopyLifecycle(w.runtime.database).facts(pkg.copy.id)).state.status).toBe(
      'PRESENT',
    );
  });

  it('a truncated object fails its read-back: never VERIFIED, the source is kept', async () => {
    const pkg = await w.addPackage();
    afterUpload.set(pkg.id, async (path) => {
      await truncate(path, 100);
    });
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'FAILED');
    const records = await new ArchiveRecordRepository(w.runtime.database).list(id);
    expect(records.map((r) => r.state)).toEqual(['PLANNED', 'UPLOADED', 'VERIFY_FAILED']);
    expect(JSON.stringify(records[2]?.detail)).toMatch(/whole-object sha256/);
    expect((await w.runtime.get(id)).outputs).toEqual([]);
    expect((await new CopyLifecycle(w.runtime.database).facts(pkg.copy.id)).state.status).toBe(
      'PRESENT',
    );
    expect((await stat(join(pkg.folder, 'scan_0002.fits'))).isFile()).toBe(true);
  });

  it('a source changed after planning is refused; an operator re-plans beside the old plan and the archive completes', async () => {
    const pkg = await w.addPackage();
    before.set(pkg.id, async (ctx) => {
      if (ctx.operation.attempt === 1)
        await writeFile(join(pkg.folder, 'scan_0003.fits'), pkg.files['scan_0003.fits'] as Buffer);
    });
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'FAILED');
    expect((await w.runtime.get(id)).lastError?.message).toMatch(
      /changed since the archive was planned .*scan_0003\.fits is another file now/,
    );
    const r = await replan(w.runtime, id, 'the file was rewritten with the same bytes');
    expect(r).toMatchObject({ replanned: 'operation', generation: 2, status: 'PENDING' });
    await w.waitStatus(id, 'COMPLETED');
    const records = await new ArchiveRecordRepository(w.runtime.database).list(id);
    expect(records.map((x) => `${x.state}@${x.generation}`)).toEqual([
      'PLANNED@1',
      'PLANNED@2',
      'UPLOADED@2',
      'READ_BACK@2',
      'VERIFIED@2',
    ]);
    const steps = (await w.runtime.get(id)).steps.map((s) => `${s.name}@${s.generation}`);
    expect(steps).toEqual(['plan@1', 'plan@2', 'upload@2', 'verify@2']);
  });

  it('archive verify re-reads independently (exit 0, or 1 with every difference) and restore rehearses the way back', async () => {
    const pkg = await w.addPackage();
    const id = await w.submitArchive(pkg);
    await w.waitStatus(id, 'COMPLETED');
    const archive = createArchiveCommand(shared);
    const ok = capture();
    expect(await archive.run(['verify', id], ok.io)).toBe(0);
    expect(ok.lines.join('\n')).toMatch(/OK: the object reads back as written; 3 members match/);
    const to = join(w.dir, `restore-${pkg.name}`);
    const restored = capture();
    expect(await archive.run(['restore', id, '--to', to, '--json'], restored.io)).toBe(0);
    const result = JSON.parse(restored.lines.join('\n'));
    expect(result.members.map((m: { name: string; ok: boolean }) => [m.name, m.ok])).toEqual([
      ['scan_0001.fits', true],
      ['scan_0002.fits', true],
      ['scan_0003.fits', true],
    ]);
    for (const [name, data] of Object.entries(pkg.files))
      expect(await readFile(join(to, name))).toEqual(data);
    // Damage the stored object in place: verify says what differs and records VERIFY_FAILED.
    const path = join(w.archive.storageRoot, `${pkg.name}.tar`);
    const bytes = await readFile(path);
    bytes[bytes.length - 40] = (bytes[bytes.length - 40] as number) ^ 0xff;
    await writeFile(path, bytes);
    const bad = capture();
    expect(await archive.run(['verify', id], bad.io)).toBe(1);
    const text = bad.lines.join('\n');
    expect(text).toMatch(/DIFFERS/);
    expect(text).toMatch(/whole-object sha256 is [0-9a-f]+, recorded/);
    expect(text).toMatch(/fails authentication/);
    const last = (await new ArchiveRecordRepository(w.runtime.database).list(id)).at(-1);
    expect(last).toMatchObject({ state: 'VERIFY_FAILED', by: 'operator' });
    expect(
      (await new CopyLifecycle(w.runtime.database).facts(pkg.copy.id)).facts.verifiedArchive,
    ).toBe(false);
  });
});
