import {
  lstat,
  lutimes,
  mkdir,
  mkdtemp,
  readFile,
  rm,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { LocalArchiveStore } from '../../stages/LocalArchiveStore.ts';
import { putOnce, STALE_TEMPORARY_MS } from '../../stages/storage.ts';

/**
 * A writer killed mid-upload leaves `<key>.partial-*` beside the key. The next put of that key
 * removes those older than the grace period, measured by the store's clock, and nothing else: a
 * fresh one (a live writer's), another key's, a symlink of that name, or what a symlink points at.
 */
let root: string;
const clock = new SimulatedClock();
const at = (msAgo: number) => new Date(clock.now() - msAgo);
const HOUR = 60 * 60 * 1000;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'opstate-stale-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const exists = (path: string) =>
  lstat(path).then(
    () => true,
    () => false,
  );

async function plant(path: string, msAgo: number) {
  await writeFile(path, 'half an upload');
  await utimes(path, at(msAgo), at(msAgo));
}

describe('stale temporary files of an archive key', () => {
  it('are removed by the next put of that key once past the grace period, nothing else', async () => {
    const store = new LocalArchiveStore(root, { clock });
    await mkdir(join(root, 'raw'), { recursive: true });
    const path = store.pathOf('raw/obs-1.tar');
    const old = `${path}.partial-0a1b2c3d`;
    const fresh = `${path}.partial-4e5f6a7b`;
    const otherKeys = `${path}.bak.partial-0c0c0c0c`;
    const notOurs = `${path}.partial-notours1`;
    const linked = `${path}.partial-0d0d0d0d`;
    const target = join(root, 'target.bin');
    await plant(old, 2 * HOUR);
    await plant(fresh, STALE_TEMPORARY_MS - 60_000);
    await plant(otherKeys, 2 * HOUR);
    await plant(notOurs, 2 * HOUR);
    await plant(target, 2 * HOUR);
    await symlink(target, linked);
    await lutimes(linked, at(2 * HOUR), at(2 * HOUR));

    expect((await store.putIfAbsent('raw/obs-1.tar', [Buffer.from('package')])).created).toBe(true);
    expect(await exists(old)).toBe(false);
    expect(await exists(fresh)).toBe(true);
    expect(await exists(otherKeys)).toBe(true);
    expect(await exists(notOurs)).toBe(true);
    expect((await lstat(linked)).isSymbolicLink()).toBe(true);
    expect(await readFile(target, 'utf8')).toBe('half an upload');

    // The live writer's file ages past the grace period: the next put (the key taken) removes it.
    await clock.advance(2 * 60_000);
    expect((await store.putIfAbsent('raw/obs-1.tar', [Buffer.from('package')])).created).toBe(
      false,
    );
    expect(await exists(fresh)).toBe(false);
    expect(await exists(otherKeys)).toBe(true);
    expect(await readFile(path, 'utf8')).toBe('package');
  });

  it('an archive key that ends like a temporary file is refused, so no object is one', async () => {
    const store = new LocalArchiveStore(root, { clock });
    await expect(
      store.putIfAbsent('raw/obs-1.tar.partial-0a1b2c3d', [Buffer.from('x')]),
    ).rejects.toMatchObject({
      code: 'BAD_INPUT',
    });
    expect(await exists(join(root, 'raw/obs-1.tar.partial-0a1b2c3d'))).toBe(false);
  });

  it('outside the archive store (unpacked members, staged files) a member named like one is left', async () => {
    const folder = join(root, 'unpacked');
    await mkdir(folder, { recursive: true });
    const member = join(folder, 'scan.fits');
    const lookalike = `${member}.partial-0e0e0e0e`;
    await plant(lookalike, 2 * HOUR);
    expect((await putOnce(member, Buffer.from('member'))).staleTemporariesRemoved).toEqual([]);
    expect(await exists(lookalike)).toBe(true);
  });
});
