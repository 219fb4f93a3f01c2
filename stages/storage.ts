import { randomUUID } from 'node:crypto';
import { link, lstat, mkdir, open, readdir, readFile, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { type Clock, systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import { ARCHIVE_KEY_FILE_ENV, type ArchiveCipher, isSealed } from './archiveCipher.ts';
import { checksumOf, sha256 } from './packageFormat.ts';
import { readPackageSource } from './packageSource.ts';

export { checksumOf };

/** A file a stage wrote (or found already written with the same bytes). */
export interface StoredObject {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
  /** `created` by this call, or `identical`: already there with the same content, left as it was. */
  readonly outcome: 'created' | 'identical';
  /** Stale temporary files of the same path that this call removed (see `putOnce`). */
  readonly staleTemporariesRemoved: readonly string[];
}

/** How long a `<path>.partial-*` file stays untouched by default: one hour. */
export const STALE_TEMPORARY_MS = 60 * 60 * 1000;

/** How `putOnce` judges an object already at the path, and a drill's hook. */
export interface PutOnceOptions {
  /**
   * Whether the bytes already at the path hold the same content as `data` (default: the same
   * sha256). An encrypted archive compares plaintexts: the same package sealed twice differs.
   */
  readonly sameContent?: (existing: Buffer) => boolean;
  /** Drills only: called after half the bytes reached the temporary file. */
  readonly afterPartialWrite?: () => void | Promise<void>;
  /**
   * How old (by mtime) a temporary file of the same path must be before it is taken for the
   * leftover of a killed writer and removed (the archive store passes `STALE_TEMPORARY_MS`, one
   * hour). Keep it well above the longest write: a live writer's temporary file younger than this
   * is never touched. Unset, nothing is removed: in a folder whose names are not all ours (an
   * unpacked package's members) a member may be named like a temporary file.
   */
  readonly staleTemporaryMs?: number;
  /** Where the time is read for that age (default the system clock). */
  readonly clock?: Clock;
}

/**
 * Writes `data` at `path` only if nothing is there (create-if-absent). The bytes go first to a
 * private temporary file opened with `wx`, are synced, then linked to `path` — `link` fails when
 * `path` exists, so the object appears whole or not at all and is never replaced. An existing
 * object is read back: the same content is success (`identical`: an earlier attempt got this
 * far), a different one is a non-retryable `CONFLICT` for an operator, never an overwrite. A
 * process killed mid-write leaves only a `<path>.partial-*` file, never a partial object; once a
 * later call for the same path has its object (created or identical), it removes those of them
 * older than `staleTemporaryMs` when that is given (`removeStaleTemporaries`).
 *
 * @example
 * ```ts
 * const { outcome } = await putOnce('/archive/obs-1.tar', bytes); // 'created' | 'identical'
 * ```
 */
export async function putOnce(
  path: string,
  data: Uint8Array,
  options: PutOnceOptions = {},
): Promise<StoredObject> {
  const digest = sha256(data);
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.partial-${randomUUID().slice(0, 8)}`;
  // Owner read/write, group read, nothing for others (the process umask may remove more).
  const handle = await open(temporary, 'wx', 0o640);
  try {
    if (options.afterPartialWrite === undefined) {
      await handle.writeFile(data);
    } else {
      const half = Math.floor(data.length / 2);
      await handle.write(data, 0, half, 0);
      await handle.sync();
      await options.afterPartialWrite();
      await handle.write(data, half, data.length - half, half);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  let outcome: StoredObject['outcome'] = 'created';
  try {
    await link(temporary, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    outcome = 'identical';
  } finally {
    await unlink(temporary);
  }
  if (outcome === 'identical') {
    const existing = await readFile(path);
    const same = options.sameContent ?? ((bytes: Buffer) => sha256(bytes) === digest);
    if (!same(existing)) {
      const found = sha256(existing);
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `${path} already holds different content (sha256 ${found}, expected content ${digest}); it was not overwritten: an operator must decide which one is right, then retry`,
        { details: { path, found, expected: digest } },
      );
    }
  }
  const staleTemporariesRemoved =
    options.staleTemporaryMs === undefined
      ? []
      : await removeStaleTemporaries(
          path,
          (options.clock ?? systemClock).now() - options.staleTemporaryMs,
        );
  return { path, sha256: digest, size: data.length, outcome, staleTemporariesRemoved };
}

/** The temporary files `putOnce` names: `<basename>.partial-` and 8 hex digits. */
const TEMPORARY = /^\.partial-[0-9a-f]{8}$/;

/**
 * Removes the temporary files `putOnce` left beside `path` (`<path>.partial-<8 hex>`) whose mtime
 * is before `olderThan` (ms since the epoch): the leftovers of writers killed mid-write. Only
 * regular files are removed, judged by `lstat` (a symlink or a folder of that name is left, and
 * nothing is followed); a temporary file of another path never matches. Best effort: a file that
 * cannot be read or removed (gone already, removed by a concurrent call) is left to the next call.
 * Returns the paths removed.
 *
 * @example
 * ```ts
 * await removeStaleTemporaries('/archive/obs-1.tar', clock.now() - STALE_TEMPORARY_MS);
 * ```
 */
export async function removeStaleTemporaries(path: string, olderThan: number): Promise<string[]> {
  const folder = dirname(path);
  const name = basename(path);
  const names = await readdir(folder).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const entry of names) {
    if (!entry.startsWith(name) || !TEMPORARY.test(entry.slice(name.length))) continue;
    const temporary = join(folder, entry);
    try {
      const st = await lstat(temporary);
      if (!st.isFile() || st.mtimeMs >= olderThan) continue;
      await unlink(temporary);
      removed.push(temporary);
    } catch {
      // Gone meanwhile, or not ours to remove: the next call looks again.
    }
  }
  return removed;
}

/**
 * Reads the content of a physical copy and checks it against the copy's recorded checksum and
 * size: a package folder is read as the package it unpacks (`readPackageSource`), a sealed archive
 * object is decrypted with `cipher`. A copy without a path, bytes that differ from the record, or
 * a sealed object without a key is a non-retryable `BAD_INPUT`.
 *
 * @example
 * ```ts
 * const bytes = await readCopy(view.inputs[0]);
 * ```
 */
export async function readCopy(copy: PhysicalCopyRecord, cipher?: ArchiveCipher): Promise<Buffer> {
  if (copy.path === null) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `copy ${copy.id} of ${copy.artifactType} ${copy.artifactId} has no path to read`,
    );
  }
  if ((await lstat(copy.path)).isDirectory()) return (await readPackageSource(copy)).bytes;
  let data: Buffer = await readFile(copy.path);
  if (isSealed(data)) {
    if (cipher === undefined) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `${copy.path} is encrypted; set ${ARCHIVE_KEY_FILE_ENV} to the key file that sealed it`,
        { details: { copyId: copy.id } },
      );
    }
    data = cipher.open(data);
  }
  return matchingRecord(copy, data, copy.path);
}

/**
 * `data` when it is what the copy's record says (its checksum and size, where recorded), else a
 * non-retryable `BAD_INPUT` naming `where` it was read.
 *
 * @example
 * ```ts
 * const plain = matchingRecord(archiveCopy, openArchiveObject(read, cipher), read.location);
 * ```
 */
export function matchingRecord(copy: PhysicalCopyRecord, data: Buffer, where: string): Buffer {
  const digest = checksumOf(sha256(data));
  if (
    (copy.checksum !== null && copy.checksum !== digest) ||
    (copy.size !== null && copy.size !== data.length)
  ) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${where} does not match its copy record (recorded ${copy.checksum}, ${copy.size} bytes; found ${digest}, ${data.length} bytes)`,
      { details: { copyId: copy.id } },
    );
  }
  return data;
}
