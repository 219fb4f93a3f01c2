import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { lstat, mkdir, readdir, rename, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import type { CopyDeleter } from '../../deleter/CopyDeleter.ts';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { DeletionRepository } from '../../persistence/DeletionRepository.ts';
import { checksumOf, sha256, writePackage } from '../../stages/packageFormat.ts';
import { type DeleterFaults, withFaults } from '../../testing.ts';
import { TIME_ORDERED_ID } from '../helpers/timeOrderedIds.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { type ArchiveWorld, startArchiveWorld, type TestPackage } from './world.ts';

/**
 * The deletion path on real files, a real git repository, a real process holding a file open and
 * real symlinks, with the deleter and the archive on the real Postgres and NATS. Every change made
 * after the plan was written is caught by the revalidation before the unlink: the member is kept
 * with its reason, the copy ends DELETION_FAILED, nothing that failed a check is deleted.
 */
let w: ArchiveWorld;
let deleter: CopyDeleter;
let holder: ChildProcess | undefined;
/** What to do to a package's files after its deletion plan is written, by copy id. */
const afterPlan = new Map<string, () => Promise<void>>();

beforeAll(async () => {
  w = await startArchiveWorld();
  w.startArchiver();
  deleter = w.startDeleter({
    openWaitMs: 3_000,
    ...withFaults<DeleterFaults>({
      async afterPlan({ copyId }) {
        await afterPlan.get(copyId)?.();
      },
    }),
  });
});
afterAll(async () => {
  holder?.kill('SIGKILL');
  await w?.close();
});

const copies = () => new CopyLifecycle(w.runtime.database);
const deletions = () => new DeletionRepository(w.runtime.database);

async function settle(pkg: TestPackage): Promise<string> {
  await waitFor(
    async () =>
      ['DELETED', 'DELETION_FAILED'].includes((await copies().facts(pkg.copy.id)).state.status),
    `the deletion of ${pkg.name} to finish`,
    30_000,
  );
  return (await copies().facts(pkg.copy.id)).state.status;
}

/** Archives a package with a change to make after its deletion plan, and waits for the verdict. */
async function archiveThenDelete(pkg: TestPackage, change?: () => Promise<void>) {
  if (change !== undefined) afterPlan.set(pkg.copy.id, change);
  const id = await w.submitArchive(pkg);
  await w.waitStatus(id, 'COMPLETED');
  const status = await settle(pkg);
  const [plan] = await deletions().plansOf(pkg.copy.id);
  const members = (await deletions().load(plan?.id as string))?.members ?? [];
  return {
    id,
    status,
    planId: plan?.id,
    members,
    byName: new Map(members.map((m) => [m.name, m])),
  };
}

/**
 * Starts a real Node process running `code` (which prints a line once it holds the file) and
 * resolves once it has printed it.
 */
async function spawnHolder(code: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => child.stdout?.once('data', () => resolve()));
  return child;
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

describe('deletion after a verified archive, revalidated member by member', () => {
  it('deletes every member of an unchanged copy, records each, writes the receipt, then DELETED', async () => {
    const pkg = await w.addPackage();
    const { id, status, planId, members } = await archiveThenDelete(pkg);
    expect(status).toBe('DELETED');
    // The deleter writes its plan under a time-ordered id, like every row the runtime keys.
    expect(planId).toMatch(TIME_ORDERED_ID);
    expect(members.map((m) => [m.name, m.outcome])).toEqual([
      ['MANIFEST.json', 'DELETED'],
      ['scan_0001.fits', 'DELETED'],
      ['scan_0002.fits', 'DELETED'],
      ['scan_0003.fits', 'DELETED'],
    ]);
    expect(await exists(pkg.folder)).toBe(false);
    const receipt = await deletions().receiptOf(pkg.copy.id);
    expect(receipt).toMatchObject({
      membersDeleted: 4,
      membersMissing: 0,
      archiveKey: `${pkg.name}.tar`,
    });
    expect(
      (await new ArchiveRecordRepository(w.runtime.database).list(id)).map((r) => r.state),
    ).toEqual([
      'PLANNED',
      'UPLOADED',
      'READ_BACK',
      'VERIFIED',
      'SOURCE_REVALIDATED',
      'DELETED',
      'RECEIPTED',
    ]);
  });

  it('deletes a copy that is a package file (its own single member)', async () => {
    const folderPkg = await w.addPackage();
    // The same package as one tar file at the buffer instead of a folder.
    const bytes = writePackage(
      Object.entries(folderPkg.files).map(([name, data]) => ({ name, data })),
    );
    const id = await w.runtime.artifacts.addRawDataPackage({ name: `${folderPkg.name}-tar` });
    const path = join(w.buffer.storageRoot, `${id}.tar`);
    await writeFile(path, bytes);
    const { copy } = await w.runtime.artifacts.addCopy({
      artifactType: 'raw_data_package',
      artifactId: id,
      locationId: w.buffer.id,
      path,
      checksum: checksumOf(sha256(bytes)),
      size: bytes.length,
    });
    const r = await archiveThenDelete({
      ...folderPkg,
      id,
      name: `${folderPkg.name}-tar`,
      copy,
      folder: path,
    });
    expect(r.status).toBe('DELETED');
    expect(r.members.map((m) => [m.name, m.outcome, m.sha256])).toEqual([
      [`${id}.tar`, 'DELETED', sha256(bytes)],
    ]);
    expect(await exists(path)).toBe(false);
    expect(await exists(folderPkg.folder)).toBe(true); // only what was archived and planned goes
  });

  it('keeps a member swapped for a symlink after planning (and follows no link)', async () => {
    const pkg = await w.addPackage();
    const target = join(w.dir, 'symlink-target.fits');
    await writeFile(target, 'not part of any package');
    const r = await archiveThenDelete(pkg, async () => {
      const member = join(pkg.folder, 'scan_0002.fits');
      await rename(member, `${member}.moved`);
      await symlink(target, member);
    });
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get('scan_0002.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(/a symlink stands where a regular file was planned/),
    });
    expect(await exists(target)).toBe(true);
    expect((await stat(join(pkg.folder, 'scan_0002.fits'))).isFile()).toBe(true); // the link is still there
  });

  it('refuses a copy whose path leads out of its storage root through `..`: nothing deleted, every member kept with the reason', async () => {
    const outside = join(w.dir, 'outside-dotdot');
    const pkg = await w.addPackage(undefined, undefined, async (id) => ({
      folder: join(outside, id),
      path: `${w.buffer.storageRoot}/../outside-dotdot/${id}`,
    }));
    const r = await archiveThenDelete(pkg);
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.members).toHaveLength(4);
    for (const m of r.members) {
      expect(m).toMatchObject({
        outcome: 'KEPT',
        reason: `the copy's path ${pkg.copy.path} resolves to ${join(outside, pkg.id)}, outside the storage root ${w.buffer.storageRoot} of its location: refused`,
      });
    }
    expect((await readdir(join(outside, pkg.id))).sort()).toEqual([
      'MANIFEST.json',
      'scan_0001.fits',
      'scan_0002.fits',
      'scan_0003.fits',
    ]);
    const [copy] = await w.runtime.database.execute<{ last_error: string }>(
      `select last_error from physical_copy where id = '${pkg.copy.id}'`,
    );
    expect(copy?.last_error).toMatch(
      /4 member\(s\) kept after revalidation; nothing was deleted: MANIFEST.json: the copy's path .* outside the storage root/,
    );
  });

  it('refuses a copy whose path became a symlink to a folder outside its storage root before planning', async () => {
    // Archived from its folder while the policy cleans nothing; then the folder is moved out of
    // the storage root and a symlink put in its place; then the policy cleans the buffer again.
    await w.policies.set({ cleanLocationTypes: [] }, 'test');
    const pkg = await w.addPackage();
    const away = join(w.dir, 'outside-link', pkg.id);
    try {
      await w.waitStatus(await w.submitArchive(pkg), 'COMPLETED');
      await mkdir(join(w.dir, 'outside-link'), { recursive: true });
      await rename(pkg.folder, away);
      await symlink(away, pkg.folder);
    } finally {
      await w.policies.set({ cleanLocationTypes: [LocationType.BUFFER] }, 'test');
    }
    deleter.wake();
    expect(await settle(pkg)).toBe('DELETION_FAILED');
    const [plan] = await deletions().plansOf(pkg.copy.id);
    const members = (await deletions().load(plan?.id as string))?.members ?? [];
    expect(members.length).toBeGreaterThan(0);
    for (const m of members) {
      expect(m.outcome).toBe('KEPT');
      expect(m.reason).toBe(
        `the copy's path ${pkg.folder} resolves to ${away}, outside the storage root ${w.buffer.storageRoot} of its location: refused`,
      );
    }
    expect((await readdir(away)).length).toBe(4);
    expect((await lstat(pkg.folder)).isSymbolicLink()).toBe(true);
  });

  it('keeps a member whose folder is moved outside the storage root and linked back after planning', async () => {
    const pkg = await w.addPackage();
    const away = join(w.dir, 'outside-moved', pkg.id);
    const r = await archiveThenDelete(pkg, async () => {
      await mkdir(join(w.dir, 'outside-moved'), { recursive: true });
      await rename(pkg.folder, away);
      await symlink(away, pkg.folder);
    });
    expect(r.status).toBe('DELETION_FAILED');
    const first = r.members[0];
    expect(first).toMatchObject({
      outcome: 'KEPT',
      reason: `resolves to ${join(away, first?.name as string)}, outside the storage root ${w.buffer.storageRoot} of its location`,
    });
    expect((await readdir(away)).length).toBe(4);
  });

  it('keeps a member modified after planning: another size, or only another mtime', async () => {
    const grown = await w.addPackage();
    const a = await archiveThenDelete(grown, async () => {
      await writeFile(join(grown.folder, 'scan_0001.fits'), 'grown after planning, grown a lot\n');
    });
    expect(a.byName.get('scan_0001.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(/modified since planning \(size \d+/),
    });
    const touched = await w.addPackage();
    const b = await archiveThenDelete(touched, async () => {
      await utimes(
        join(touched.folder, 'scan_0003.fits'),
        new Date('2020-01-01'),
        new Date('2020-01-01'),
      );
    });
    expect(b.byName.get('scan_0003.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(/modified since planning/),
    });
    expect([a.status, b.status]).toEqual(['DELETION_FAILED', 'DELETION_FAILED']);
    expect(await exists(join(grown.folder, 'scan_0001.fits'))).toBe(true);
    expect(await exists(join(touched.folder, 'scan_0003.fits'))).toBe(true);
  });

  it('keeps a member replaced by a new file of equal size and mtime (a new inode)', async () => {
    const pkg = await w.addPackage();
    const r = await archiveThenDelete(pkg, async () => {
      const member = join(pkg.folder, 'scan_0002.fits');
      const { mtime, size } = await stat(member);
      const fresh = `${member}.new`;
      await writeFile(fresh, Buffer.alloc(size, 0x41));
      await utimes(fresh, mtime, mtime);
      await rename(fresh, member);
    });
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get('scan_0002.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(/replaced by another file since planning \(device:inode/),
    });
    expect((await stat(join(pkg.folder, 'scan_0002.fits'))).size).toBe(
      pkg.files['scan_0002.fits']?.length,
    );
  });

  it('keeps a member another process holds open', async () => {
    const pkg = await w.addPackage();
    const member = join(pkg.folder, 'scan_0001.fits');
    const r = await archiveThenDelete(pkg, async () => {
      holder = await spawnHolder(
        `require('fs').openSync(${JSON.stringify(member)}, 'r'); console.log('open'); setInterval(() => {}, 1000);`,
      );
    });
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get('scan_0001.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: `open by process ${holder?.pid} (node)`,
    });
    expect(await exists(member)).toBe(true);
    holder?.kill('SIGKILL');
  });

  it('deletes a member another process held open only for a moment, once it closed it', async () => {
    const pkg = await w.addPackage();
    const member = join(pkg.folder, 'scan_0001.fits');
    let reader: ChildProcess | undefined;
    const r = await archiveThenDelete(pkg, async () => {
      // Holds the member open for half a second, as a peer deleter hashing it would, then lives on.
      reader = await spawnHolder(
        `const fs = require('fs'); const fd = fs.openSync(${JSON.stringify(member)}, 'r'); console.log('open'); setTimeout(() => fs.closeSync(fd), 500); setInterval(() => {}, 1000);`,
      );
    });
    reader?.kill('SIGKILL');
    expect(r.status).toBe('DELETED');
    expect(r.byName.get('scan_0001.fits')).toMatchObject({ outcome: 'DELETED', reason: null });
    expect(await exists(member)).toBe(false);
  });

  it('revalidates a member held open again once it is closed: one its holder changed is kept', async () => {
    const pkg = await w.addPackage();
    const member = join(pkg.folder, 'scan_0002.fits');
    let writer: ChildProcess | undefined;
    const r = await archiveThenDelete(pkg, async () => {
      // Holds the member open, appends to it after a moment, then closes it and lives on.
      writer = await spawnHolder(
        `const fs = require('fs'); const fd = fs.openSync(${JSON.stringify(member)}, 'a'); console.log('open'); setTimeout(() => { fs.writeSync(fd, 'x'); fs.closeSync(fd); }, 500); setInterval(() => {}, 1000);`,
      );
    });
    writer?.kill('SIGKILL');
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get('scan_0002.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: expect.stringMatching(/modified since planning/),
    });
    expect(await exists(member)).toBe(true);
  });

  it('keeps members under a protected prefix added to the policy after planning', async () => {
    const pkg = await w.addPackage();
    const r = await archiveThenDelete(pkg, async () => {
      await w.policies.set({ protectedPrefixes: [pkg.folder] }, 'test');
    });
    await w.policies.set({ protectedPrefixes: [] }, 'test');
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.members.map((m) => m.outcome)).toEqual(['KEPT', 'KEPT', 'KEPT', 'KEPT']);
    expect(r.members[0]?.reason).toBe(
      `under the protected prefix ${pkg.folder} (the deletion policy as read at delete time)`,
    );
    expect((await readdir(pkg.folder)).sort()).toEqual([
      'MANIFEST.json',
      'scan_0001.fits',
      'scan_0002.fits',
      'scan_0003.fits',
    ]);
  });

  it('keeps a member that became tracked by git after planning; untracked files in the work tree go', async () => {
    const pkg = await w.addPackage();
    const r = await archiveThenDelete(pkg, async () => {
      execFileSync('git', ['init', '-q', pkg.folder]);
      execFileSync('git', ['-C', pkg.folder, 'add', 'scan_0003.fits']);
    });
    expect(r.status).toBe('DELETION_FAILED');
    expect(r.byName.get('scan_0003.fits')).toMatchObject({
      outcome: 'KEPT',
      reason: `tracked by git in the work tree ${pkg.folder}`,
    });
    expect(r.byName.get('scan_0001.fits')?.outcome).toBe('DELETED');
    expect(await exists(join(pkg.folder, 'scan_0003.fits'))).toBe(true);
  });

  it('keeps every member once the archive is no longer VERIFIED', async () => {
    const pkg = await w.addPackage();
    let op = '';
    const r = await archiveThenDelete(pkg, async () => {
      const [plan] = await deletions().plansOf(pkg.copy.id);
      op = plan?.archiveOperationId as string;
      await new ArchiveRecordRepository(w.runtime.database).recordVerification({
        operationId: op,
        state: ArchiveState.VERIFY_FAILED,
        by: 'operator',
        detail: { differences: ['test: storage reported a bad sector'] },
      });
    });
    expect(r.status).toBe('DELETION_FAILED');
    expect(
      r.members.every(
        (m) =>
          m.outcome === 'KEPT' &&
          /no longer VERIFIED as planned: the archive's last verification failed/.test(
            String(m.reason),
          ),
      ),
    ).toBe(true);
    expect((await readdir(pkg.folder)).length).toBe(4);
  });

  it('records a member already gone as MISSING (never guessed deleted) and still ends DELETED with the receipt', async () => {
    const pkg = await w.addPackage();
    const r = await archiveThenDelete(pkg, async () => {
      await rename(join(pkg.folder, 'scan_0002.fits'), join(w.dir, `${pkg.name}-moved.fits`));
    });
    expect(r.status).toBe('DELETED');
    expect(r.byName.get('scan_0002.fits')).toMatchObject({
      outcome: 'MISSING',
      reason: expect.stringMatching(/cannot be verified/),
    });
    expect(await deletions().receiptOf(pkg.copy.id)).toMatchObject({
      membersDeleted: 3,
      membersMissing: 1,
    });
  });

  it('inspect shows kept members with their reasons and the next safe action; a re-plan deletes what now passes', async () => {
    const pkg = await w.addPackage();
    const r = await archiveThenDelete(pkg, async () => {
      await utimes(
        join(pkg.folder, 'scan_0001.fits'),
        new Date('2021-01-01'),
        new Date('2021-01-01'),
      );
    });
    const lines: string[] = [];
    const shared = () => Promise.resolve({ ...w.runtime.database, close: async () => {} });
    await createInspectCommand(shared).run([r.id], {
      out: (l) => lines.push(l),
      err: (l) => lines.push(l),
    });
    const text = lines.join('\n');
    expect(text).toMatch(/deletion +DELETION_FAILED, plan 1/);
    expect(text).toMatch(/kept +.*scan_0001\.fits: modified since planning/);
    expect(text).toMatch(
      /next safe action: review: 1 member kept .*`opstate retry .* --replan` plans the deletion again/,
    );
    // The content is what was archived (only the mtime changed): a new plan deletes it.
    await copies().apply(
      pkg.copy.id,
      { type: 'REPLAN_DELETION' },
      { by: 'operator', reason: 'mtime only' },
    );
    deleter.wake();
    expect(await settle(pkg)).toBe('DELETED');
    expect(await exists(pkg.folder)).toBe(false);
    expect((await deletions().receiptOf(pkg.copy.id))?.membersDeleted).toBe(4);
  });
});
