import { randomUUID } from 'node:crypto';
import { link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import { sha256 } from './packageFormat.ts';

/** A file a stage wrote (or found already written with the same bytes). */
export interface StoredObject {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
  /** `created` by this call, or `identical`: already there with the same digest, left as it was. */
  readonly outcome: 'created' | 'identical';
}

/** How a copy's checksum is written in `physical_copy.checksum`. */
export const checksumOf = (hex: string) => `sha256:${hex}`;

/**
 * Writes `data` at `path` only if nothing is there (create-if-absent). The bytes go first to a
 * private temporary file opened with `wx`, are synced, then linked to `path` — `link` fails when
 * `path` exists, so the object appears whole or not at all and is never replaced. An existing
 * object is read back: the same sha256 is success (`identical`: an earlier attempt got this far),
 * a different one is a non-retryable `CONFLICT` for an operator, never an overwrite.
 *
 * @example
 * ```ts
 * const { outcome } = await putOnce('/archive/obs-1.tar', bytes); // 'created' | 'identical'
 * ```
 */
export async function putOnce(path: string, data: Uint8Array): Promise<StoredObject> {
  const digest = sha256(data);
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.partial-${randomUUID().slice(0, 8)}`;
  const handle = await open(temporary, 'wx');
  try {
    await handle.writeFile(data);
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
    const found = sha256(await readFile(path));
    if (found !== digest) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `${path} already holds different content (sha256 ${found}, expected ${digest}); it was not overwritten: an operator must decide which one is right, then retry`,
        { details: { path, found, expected: digest } },
      );
    }
  }
  return { path, sha256: digest, size: data.length, outcome };
}

/**
 * Reads the file of a physical copy and checks it against the copy's recorded checksum and size.
 * A copy without a path, or bytes that differ from the record, is a non-retryable `BAD_INPUT`.
 *
 * @example
 * ```ts
 * const bytes = await readCopy(view.inputs[0]);
 * ```
 */
export async function readCopy(copy: PhysicalCopyRecord): Promise<Buffer> {
  if (copy.path === null) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `copy ${copy.id} of ${copy.artifactType} ${copy.artifactId} has no path to read`,
    );
  }
  const data = await readFile(copy.path);
  const digest = checksumOf(sha256(data));
  if (
    (copy.checksum !== null && copy.checksum !== digest) ||
    (copy.size !== null && copy.size !== data.length)
  ) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${copy.path} does not match its copy record (recorded ${copy.checksum}, ${copy.size} bytes; found ${digest}, ${data.length} bytes)`,
      { details: { copyId: copy.id } },
    );
  }
  return data;
}
