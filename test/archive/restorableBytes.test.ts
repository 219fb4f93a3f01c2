import { mkdir, open, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createArchiveCommand } from '../../cli/commands/archive.ts';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { ArtifactType } from '../../persistence/ArtifactType.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import {
  checksumOf,
  MANIFEST_NAME,
  packageWithManifest,
  sha256,
  writePackage,
} from '../../stages/packageFormat.ts';
import { type DeleterFaults, withFaults } from '../../testing.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { type ArchiveWorld, startArchiveWorld, type TestPackage } from './world.ts';

/**
 * What is deleted can be restored, byte for byte, on the real Postgres and NATS with real files:
 * a folder whose MANIFEST.json is valid but not in opstate's own layout is archived with that
 * manifest as it is (deleted, and restored identical); one recorded in the regenerated form keeps
 * its MANIFEST.json with the reason; a member rewritten in place after planning (size and mtime
 * put back) is kept; and `archive verify` names a deleted member the archive does not hold.
 */
let w: ArchiveWorld;
const afterPlan = new Map<string, () => Promise<void>>();
let n = 0;

beforeAll(async () => {
  w = await startArchiveWorld();
  w.startArchiver();
  w.startDeleter({
    ...withFaults<DeleterFaults>({
      async afterPlan({ copyId }) {
        await afterPlan.get(copyId)?.();
      },
    }),
  });
});
afterAll(async () => {
  await w?.close();
});

const copies = () => new CopyLifecycle(w.runtime.database);
const deletions = () => new DeletionRepository(w.runtime.database);
const shared = () => Promise.resolve({ ...w.runtime.database, close: async () => {} });
function capture() {
  const lines: string[] = [];
  return { lines, io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) } };
}

const FILES = () => ({
  'scan_0001.fits': Buffer.from(`first scan ${++n}\n`),
  'scan_0002.fits': Buffer.from(`second scan ${n}\n`.repeat(30)),
});

/** A folder as an instrument writes it: compact JSON, fields opstate does not write. */
function foreignManifest(files: Record<string, Buffer>): Buffer {
  return Buffer.from(
    JSON.stringify({
      instrument: 'LST-1',
      note: 'written by the acquisition system',
      members: Object.entries(files).map(([name, data]) => ({
        name,
        size: data.length,
        sha256: sha256(data),
        instrument: 'LST-1',
      })),
    }),
  );
}

/**
 * Writes a package folder with the given MANIFEST.json and registers its copy with the checksum
 * of `recordedAs` (the package form its copy record names).
 */
async function addFolder(
  manifest: Buffer,
  files: Record<string, Buffer>,
  recordedAs: 'own' | 'regenerated',
): Promise<TestPackage> {
  const name = `foreign-${Date.now().toString(36)}-${++n}`;
  const id = await w.runtime.artifacts.addRawDataPackage({ name });
  const folder = join(w.buffer.storageRoot, 'raw_data_package', id);
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, MANIFEST_NAME), manifest);
  for (const [f, data] of Object.entries(files)) await writeFile(join(folder, f), data);
  const members = Object.entries(files).map(([f, data]) => ({ name: f, data }));
  const bytes =
    recordedAs === 'own' ? packageWithManifest(manifest, members) : writePackage(members);
  const { copy } = await w.runtime.artifacts.addCopy({
    artifactType: ArtifactType.RAW_DATA_PACKAGE,
    artifactId: id,
    locationId: w.buffer.id,
    path: folder,
    checksum: checksumOf(sha256(bytes)),
    size: bytes.length,
  });
  return { id, name, copy, folder, files };
}

async function archiveThenDelete(pkg: TestPackage, change?: () => Promise<void>) {
  if (change !== undefined) afterPlan.set(pkg.copy.id, change);
  const id = await w.submitArchive(pkg);
  await w.waitStatus(id, 'COMPLETED');
  await waitFor(
    async () =>
      ['DELETED', 'DELETION_FAILED'].includes((await copies().facts(pkg.copy.id)).state.status),
    `the deletion of ${pkg.name} to finish`,
    30_000,
  );
  const status = (await copies().facts(pkg.copy.id)).state.status;
  const [plan] = await deletions().plansOf(pkg.copy.id);
  const members = (await deletions().load(plan?.id as string))?.members ?? [];
  return { id, status, byName: new Map(members.map((m) => [m.name, m])) };
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

describe('a member is deleted only when the verified archive holds exactly its bytes', () => {
  it('archives a foreign MANIFEST.json as it is: deleted, then restored byte for byte', async () => {
    const files = FILES();
    const manifest = foreignManifest(files);
    const pkg = await addFolder(manifest, files, 'own');
    const r = await archiveThenDelete(pkg);
    expect(r.status).toBe('DELETED');
    expect(r.byName.get(MANIFEST_NAME)?.outcome).toBe('DELETED');
    expect(await exists(pkg.folder)).toBe(false);
    const archive = createArchiveCommand(shared);
    const verified = capture();
    expect(await archive.run(['verify', r.id], verified.io)).toBe(0);
    expect(verified.lines.join('\n')).toMatch(
      /3 deleted source member\(s\) are held byte for byte/,
    );
    const to = join(w.dir, `restore-${pkg.name}`);
    const restored = capture();
    expect(await archive.run(['restore', r.id, '--to', to], restored.io)).toBe(0);
    expect(await readFile(join(to, MANIFEST_NAME))).toEqual(manifest);
    for (const [f, data] of Object.entries(files))
      expect(await readFile(join(to, f))).toEqual(data);
    // Neither the archive object nor a restored file is readable by every user of the host.
    const others = async (path: string) => (await stat(path)).mode & 0o007;
    expect(await others(join(w.archive.storageRoot, `${pkg.name}.tar`))).toBe(0);
    expect(await others(join(to, MANIFEST_NAME))).toBe(0);
    expect(await others(join(to, 'scan_0001.fits'))).toBe(0);
  });

  it('keeps a MANIFEST.json the archive holds regenerated, with the reason, and says the copy is partly deleted', async () => {
    const files = FILES();
    const manifest = foreignManifest(files);
    // Recorded with the checksum of the regenerated form: the archive holds opstate's manifest.
    const pkg = await addFolder(manifest, files, 'regenerated');
    const r = await archiveThenDelete(pkg);
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get(MANIFEST_NAME)).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(
        /the archive holds other bytes for it .*would not give it back byte for byte/,
      ),
    });
    expect(r.byName.get('scan_0001.fits')?.outcome).toBe('DELETED');
    expect(await readFile(join(pkg.folder, MANIFEST_NAME))).toEqual(manifest);
    const facts = await copies().facts(pkg.copy.id);
    expect(facts.state.lastError ?? '').toMatch(/the copy is partly deleted/);
    const shown = capture();
    await createInspectCommand(shared).run([r.id], shown.io);
    const text = shown.lines.join('\n');
    expect(text).toMatch(/kept +.*MANIFEST\.json: the archive holds other bytes for it/);
    expect(text).toMatch(/next safe action: review: 1 member kept.*the source is partly deleted/);
  });

  it('keeps a member rewritten in place after planning with its size and mtime put back', async () => {
    const files = FILES();
    const pkg = await addFolder(foreignManifest(files), files, 'own');
    const member = join(pkg.folder, 'scan_0002.fits');
    // A whole-second mtime, so that it can be put back exactly (ns) after the rewrite.
    const when = new Date('2024-03-01T12:00:00Z');
    await utimes(member, when, when);
    const r = await archiveThenDelete(pkg, async () => {
      const size = (await stat(member)).size;
      const handle = await open(member, 'r+');
      await handle.write(Buffer.alloc(size, 0x5a), 0, size, 0);
      await handle.close();
      await utimes(member, when, when);
    });
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get('scan_0002.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(/the archive holds other bytes for it now/),
    });
    expect(await exists(member)).toBe(true);
  });

  it('archive verify and restore fail, naming it, when a deleted member is not held by the archive', async () => {
    const files = FILES();
    const pkg = await addFolder(foreignManifest(files), files, 'own');
    const r = await archiveThenDelete(pkg);
    expect(r.status).toBe('DELETED');
    // A deletion an earlier version made: its plan recorded the folder's own manifest digest,
    // which the archive (holding a regenerated manifest) does not hold.
    await w.runtime.database.execute('alter table copy_deletion_member disable trigger user');
    await w.runtime.database.execute(
      `update copy_deletion_member set sha256 = '${sha256(Buffer.from('another manifest'))}'
       where name = '${MANIFEST_NAME}' and path = '${join(pkg.folder, MANIFEST_NAME)}'`,
    );
    await w.runtime.database.execute('alter table copy_deletion_member enable trigger user');
    const archive = createArchiveCommand(shared);
    const verified = capture();
    expect(await archive.run(['verify', r.id], verified.io)).toBe(1);
    expect(verified.lines.join('\n')).toMatch(
      new RegExp(
        `deleted source member ${join(pkg.folder, MANIFEST_NAME)} .*is not in the archive as it was`,
      ),
    );
    const restored = capture();
    expect(
      await archive.run(
        ['restore', r.id, '--to', join(w.dir, `restore2-${pkg.name}`)],
        restored.io,
      ),
    ).toBe(1);
    expect(restored.lines.join('\n')).toMatch(
      /NOT OK: .*1 deleted source member\(s\) do not come back/,
    );
  });
});
