import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import {
  ARCHIVE_KEY_FILE_ENV,
  type ArchiveCipher,
  isSealed,
  sealedKeyId,
} from './archiveCipher.ts';
import { sha256 } from './packageFormat.ts';
import { type PutOnceOptions, putOnce, STALE_TEMPORARY_MS } from './storage.ts';

/** An archive object as stored: where, its identity, and what it holds. */
export interface StoredArchive {
  readonly key: string;
  readonly path: string;
  /** sha256 (hex) of the stored bytes: the ciphertext when encrypted. */
  readonly objectSha256: string;
  /** Which physical object this is (`<device>:<inode>:<mtime ns>`): a replaced object has another. */
  readonly objectVersion: string;
  readonly objectSize: number;
  /** sha256 (hex) of the package (the plaintext). */
  readonly contentSha256: string;
  readonly contentSize: number;
  readonly encrypted: boolean;
  readonly keyId: string | null;
  /** `created` now, or `identical`: already there with the same content (an earlier attempt). */
  readonly outcome: 'created' | 'identical';
}

/** An archive object read back as stored (not yet decrypted). */
export interface ReadArchive {
  readonly path: string;
  readonly stored: Buffer;
  readonly objectVersion: string;
  readonly encrypted: boolean;
  readonly keyId: string | null;
}

const KEY = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/**
 * Checks an archive key: a relative path of letters, digits, `.`, `_`, `-` and `/`, with no `.`
 * or `..` segment, that does not end like a temporary file of `putOnce` (`.partial-<8 hex>`).
 * Anything else is a `BAD_INPUT`.
 *
 * @example
 * ```ts
 * checkArchiveKey('raw_data_package/obs-1.tar'); // returns it
 * ```
 */
export function checkArchiveKey(key: string): string {
  if (!KEY.test(key) || key.split('/').some((s) => s === '.' || s === '..')) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `archive key '${key}' must be a relative path of letters, digits, '.', '_', '-' and '/', without '.' or '..' segments`,
    );
  }
  if (TEMPORARY_NAME.test(key)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `archive key '${key}' ends like a temporary file ('.partial-' and 8 hex digits), which a put of the key before it would remove once stale`,
    );
  }
  return key;
}

/** A name `putOnce` gives its temporary files: an archive key never ends so. */
const TEMPORARY_NAME = /\.partial-[0-9a-f]{8}$/;

async function versionOf(path: string): Promise<string> {
  const st = await lstat(path, { bigint: true });
  if (!st.isFile()) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${path} is not a regular file (a symlink or a folder stands at the archive key)`,
    );
  }
  return `${st.dev}:${st.ino}:${st.mtimeNs}`;
}

/**
 * The archive storage of one long-term-archive location: a local folder (its storage root) whose
 * objects are written once at a stable key and never replaced, encrypted with `cipher` when one
 * is given. The archive handler, `opstate archive verify` and `opstate archive restore` all go
 * through it, so a restore rehearses the same path an incident would use.
 *
 * @example
 * ```ts
 * const store = new LocalArchiveStore('/lta', archiveCipherFromEnv());
 * const put = await store.put('obs-1.tar', packageBytes);     // created | identical
 * const { plain } = await store.read('obs-1.tar');             // decrypted
 * ```
 */
export class LocalArchiveStore {
  /**
   * `temporaries`: when a killed writer's `<key>.partial-*` file counts as stale and is removed
   * by the next put of that key (`staleTemporaryMs`, default one hour), and the clock it is
   * measured by.
   */
  constructor(
    readonly root: string,
    private readonly cipher?: ArchiveCipher,
    private readonly temporaries: Pick<PutOnceOptions, 'staleTemporaryMs' | 'clock'> = {},
  ) {}

  /** The file behind a key. */
  pathOf(key: string): string {
    return join(this.root, checkArchiveKey(key));
  }

  /**
   * Stores a package at `key` if nothing is there (see `putOnce`). An object already there is
   * decrypted (when sealed) and its plaintext compared: the same package is `identical`, another
   * one (or an object that fails authentication) is a non-retryable `CONFLICT`, never replaced.
   */
  async put(
    key: string,
    plain: Uint8Array,
    options: { afterPartialWrite?: () => void | Promise<void> } = {},
  ): Promise<StoredArchive> {
    const path = this.pathOf(key);
    const contentSha256 = sha256(plain);
    const bytes = this.cipher === undefined ? Buffer.from(plain) : this.cipher.seal(plain);
    const put = await putOnce(path, bytes, {
      staleTemporaryMs: this.temporaries.staleTemporaryMs ?? STALE_TEMPORARY_MS,
      ...(this.temporaries.clock === undefined ? {} : { clock: this.temporaries.clock }),
      ...(options.afterPartialWrite === undefined
        ? {}
        : { afterPartialWrite: options.afterPartialWrite }),
      sameContent: (existing) => {
        const content = this.plainOf(existing, path, true);
        return content !== undefined && sha256(content) === contentSha256;
      },
    });
    const stored = put.outcome === 'created' ? bytes : await readFile(path);
    return {
      key,
      path,
      objectSha256: sha256(stored),
      objectVersion: await versionOf(path),
      objectSize: stored.length,
      contentSha256,
      contentSize: plain.length,
      encrypted: isSealed(stored),
      keyId: sealedKeyId(stored) ?? null,
      outcome: put.outcome,
    };
  }

  /**
   * Reads an object back whole, as stored, with its version taken before and after the read.
   * `open` turns the stored bytes into the package.
   */
  async read(key: string): Promise<ReadArchive> {
    const path = this.pathOf(key);
    const before = await versionOf(path);
    const stored = await readFile(path);
    const after = await versionOf(path);
    if (before !== after) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `${path} changed while it was read (version ${before}, then ${after})`,
        { retryable: true },
      );
    }
    return {
      path,
      stored,
      objectVersion: before,
      encrypted: isSealed(stored),
      keyId: sealedKeyId(stored) ?? null,
    };
  }

  /**
   * The package inside stored bytes: decrypted when sealed (`CONFIG` without the key or with
   * another key; `BAD_INPUT` when they fail authentication), as they are otherwise.
   */
  open(read: Pick<ReadArchive, 'stored' | 'path'>): Buffer {
    return this.plainOf(read.stored, read.path, false) as Buffer;
  }

  /** The current version of the object at a key, or null when there is none. */
  async version(key: string): Promise<string | null> {
    try {
      return await versionOf(this.pathOf(key));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  /**
   * The package inside stored bytes. When `lenient`, bytes that fail authentication give
   * undefined (they are simply not the same content); a missing or foreign key always throws.
   */
  private plainOf(stored: Buffer, path: string, lenient: boolean): Buffer | undefined {
    if (!isSealed(stored)) return stored;
    if (this.cipher === undefined) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `${path} is encrypted (key ${sealedKeyId(stored)}); set ${ARCHIVE_KEY_FILE_ENV} to the key file that sealed it`,
      );
    }
    try {
      return this.cipher.open(stored);
    } catch (err) {
      if (lenient && err instanceof OpstateError && err.code === OpstateErrorCode.BAD_INPUT) {
        return undefined;
      }
      throw err;
    }
  }
}
