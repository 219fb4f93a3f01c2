import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, link, lstat, mkdir, open, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { ArchiveStore, ArchiveStoreFactory } from './ArchiveStore.ts';
import { checkArchiveKey } from './archiveObject.ts';
import { removeStaleTemporaries, STALE_TEMPORARY_MS } from './storage.ts';

/** The only place that knows what a version of a local object is: device, inode and mtime (ns). */
function versionOfStat(st: { dev: bigint; ino: bigint; mtimeNs: bigint }): string {
  return `${st.dev}:${st.ino}:${st.mtimeNs}`;
}

function notAFile(path: string): OpstateError {
  return new OpstateError(
    OpstateErrorCode.BAD_INPUT,
    `${path} is not a regular file (a symlink or a folder stands at the archive key)`,
  );
}

async function writeAll(
  handle: FileHandle,
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): Promise<void> {
  for await (const chunk of body) {
    let offset = 0;
    while (offset < chunk.length) {
      offset += (await handle.write(chunk, offset, chunk.length - offset)).bytesWritten;
    }
  }
  await handle.sync();
}

/**
 * The archive store of a local folder (a location whose `storageRoot` is a path or `file:` URL):
 * an object is a file at `<root>/<key>`, written to a private `<key>.partial-<8 hex>` file, synced
 * and `link`ed to the key — `link` fails when the key exists, so the object appears whole or not
 * at all and is never replaced. Its version is `<device>:<inode>:<mtime ns>`: a file replaced or
 * rewritten in place has another. A writer killed midway leaves only its temporary file, which the
 * next put of that key removes once it is older than `staleTemporaryMs` (one hour by default) by
 * `clock`. Files are created 0640; a symlink or a folder at a key is never followed or read.
 *
 * @example
 * ```ts
 * const store = new LocalArchiveStore('/lta');
 * await store.putIfAbsent('raw_data_package/obs-1.tar', [bytes]); // { created: true, version }
 * ```
 */
export class LocalArchiveStore implements ArchiveStore {
  private readonly staleTemporaryMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly root: string,
    options: { readonly staleTemporaryMs?: number; readonly clock?: Clock } = {},
  ) {
    this.staleTemporaryMs = options.staleTemporaryMs ?? STALE_TEMPORARY_MS;
    this.clock = options.clock ?? systemClock;
  }

  /** The file behind a key. */
  pathOf(key: string): string {
    return join(this.root, checkArchiveKey(key));
  }

  describe(key: string): string {
    return this.pathOf(key);
  }

  async putIfAbsent(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<{ created: boolean; version: string }> {
    const path = this.pathOf(key);
    await mkdir(dirname(path), { recursive: true });
    const temporary = `${path}.partial-${randomUUID().slice(0, 8)}`;
    // Owner read/write, group read, nothing for others (the process umask may remove more).
    const handle = await open(temporary, 'wx', 0o640);
    let created = true;
    try {
      try {
        await writeAll(handle, body);
      } finally {
        await handle.close();
      }
      await link(temporary, path).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
        created = false;
      });
    } finally {
      await unlink(temporary);
    }
    const found = await this.stat(key);
    if (found === null) {
      throw new OpstateError(OpstateErrorCode.CONFLICT, `${path} vanished right after its put`, {
        retryable: true,
      });
    }
    await removeStaleTemporaries(path, this.clock.now() - this.staleTemporaryMs);
    return { created, version: found.version };
  }

  async read(key: string): Promise<{ version: string; body: AsyncIterable<Uint8Array> } | null> {
    const path = this.pathOf(key);
    let handle: FileHandle;
    try {
      handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return null;
      if (code === 'ELOOP') throw notAFile(path);
      throw err;
    }
    const st = await handle.stat({ bigint: true });
    if (!st.isFile()) {
      await handle.close();
      throw notAFile(path);
    }
    return { version: versionOfStat(st), body: handle.createReadStream() };
  }

  async stat(key: string): Promise<{ size: number; version: string } | null> {
    const path = this.pathOf(key);
    try {
      const st = await lstat(path, { bigint: true });
      if (!st.isFile()) throw notAFile(path);
      return { size: Number(st.size), version: versionOfStat(st) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }
}

/**
 * The factory of the local folder store: a storage root that is a path, `file:/path` or
 * `file:///path`. Registered for `file` (and storage roots with no scheme) by default.
 *
 * @example
 * ```ts
 * localArchiveStore('file:///lta', { clock: systemClock }).describe('k'); // '/lta/k'
 * ```
 */
export const localArchiveStore: ArchiveStoreFactory = (location, { clock }) => {
  const folder = location.startsWith('file://')
    ? fileURLToPath(location)
    : location.startsWith('file:')
      ? location.slice('file:'.length)
      : location;
  return new LocalArchiveStore(folder, { clock });
};
