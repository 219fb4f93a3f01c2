import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { ArchiveStore } from './ArchiveStore.ts';
import {
  ARCHIVE_KEY_FILE_ENV,
  type ArchiveCipher,
  isSealed,
  sealedKeyId,
} from './archiveCipher.ts';
import { sha256 } from './packageFormat.ts';

/** An archive object as stored: where, its identity, and what it holds. */
export interface StoredArchive {
  readonly key: string;
  /** Where the store keeps it (`ArchiveStore.describe`), for people and the copy record. */
  readonly location: string;
  /** sha256 (hex) of the stored bytes: the ciphertext when encrypted. */
  readonly objectSha256: string;
  /** The store's version of the physical object (opaque): a replaced object has another. */
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

/** An archive object read back whole, as stored (not yet decrypted). */
export interface ReadArchive {
  readonly location: string;
  readonly stored: Buffer;
  readonly objectVersion: string;
  /** The sha256 the store keeps for the object, where it keeps one. */
  readonly storeSha256?: string;
  readonly encrypted: boolean;
  readonly keyId: string | null;
}

const KEY = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;
/** A name the local store gives its temporary files: an archive key never ends so. */
const TEMPORARY_NAME = /\.partial-[0-9a-f]{8}$/;

/**
 * Checks an archive key: a relative path of letters, digits, `.`, `_`, `-` and `/`, with no `.`
 * or `..` segment, that does not end like a temporary file (`.partial-<8 hex>`). Anything else is
 * a `BAD_INPUT`. The same rule for every store.
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

/** `bytes` as a stream of two chunks, `between` awaited once the first was taken (a drill's hook). */
async function* chunksOf(
  bytes: Uint8Array,
  between?: () => void | Promise<void>,
): AsyncGenerator<Uint8Array> {
  if (between === undefined) {
    yield bytes;
    return;
  }
  const half = Math.floor(bytes.length / 2);
  yield bytes.subarray(0, half);
  await between();
  yield bytes.subarray(half);
}

/**
 * The package inside stored bytes: decrypted when sealed (`CONFIG` without the key or with another
 * key; `BAD_INPUT` when they fail authentication), as they are otherwise.
 *
 * @example
 * ```ts
 * const plain = openArchiveObject(await readArchiveObject(store, key), cipher);
 * ```
 */
export function openArchiveObject(
  read: Pick<ReadArchive, 'stored' | 'location'>,
  cipher: ArchiveCipher | undefined,
): Buffer {
  if (!isSealed(read.stored)) return read.stored;
  if (cipher === undefined) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `${read.location} is encrypted (key ${sealedKeyId(read.stored)}); set ${ARCHIVE_KEY_FILE_ENV} to the key file that sealed it`,
    );
  }
  return cipher.open(read.stored);
}

/**
 * Reads the object at `key` whole through its store, then checks that the key still holds the
 * version the body came from (another version: it changed during the read, a retryable
 * `CONFLICT`). No object is a `NOT_FOUND`.
 *
 * @example
 * ```ts
 * const read = await readArchiveObject(store, 'raw_data_package/obs-1.tar');
 * ```
 */
export async function readArchiveObject(store: ArchiveStore, key: string): Promise<ReadArchive> {
  const location = store.describe(checkArchiveKey(key));
  const found = await store.read(key);
  if (found === null) {
    throw new OpstateError(OpstateErrorCode.NOT_FOUND, `no object at key ${key} (${location})`);
  }
  const chunks: Uint8Array[] = [];
  for await (const chunk of found.body) chunks.push(chunk);
  const stored = Buffer.concat(chunks);
  const now = await store.stat(key);
  if (now?.version !== found.version) {
    throw new OpstateError(
      OpstateErrorCode.CONFLICT,
      `${location} changed while it was read (version ${found.version}, then ${now?.version ?? 'none'})`,
      { retryable: true },
    );
  }
  return {
    location,
    stored,
    objectVersion: found.version,
    ...(now.sha256 === undefined ? {} : { storeSha256: now.sha256 }),
    encrypted: isSealed(stored),
    keyId: sealedKeyId(stored) ?? null,
  };
}

/** The package in stored bytes, or undefined when they fail authentication (not the same content). */
function plainOrUndefined(
  read: ReadArchive,
  cipher: ArchiveCipher | undefined,
): Buffer | undefined {
  try {
    return openArchiveObject(read, cipher);
  } catch (err) {
    if (err instanceof OpstateError && err.code === OpstateErrorCode.BAD_INPUT) return undefined;
    throw err;
  }
}

/**
 * Stores a package at `key` if nothing is there, sealed with `cipher` when one is given. An object
 * already at the key is read back and opened: the same package is `identical` (an earlier attempt
 * stored it), another one — or one that fails authentication — is a non-retryable `CONFLICT` for
 * an operator, never overwritten. The same protocol for every store.
 *
 * @example
 * ```ts
 * const put = await storeArchive(store, 'raw_data_package/obs-1.tar', packageBytes, cipher);
 * ```
 */
export async function storeArchive(
  store: ArchiveStore,
  key: string,
  plain: Uint8Array,
  cipher: ArchiveCipher | undefined,
  hooks: { readonly afterPartialWrite?: () => void | Promise<void> } = {},
): Promise<StoredArchive> {
  const location = store.describe(checkArchiveKey(key));
  const contentSha256 = sha256(plain);
  const bytes = cipher === undefined ? Buffer.from(plain) : cipher.seal(plain);
  const put = await store.putIfAbsent(key, chunksOf(bytes, hooks.afterPartialWrite));
  let stored: Buffer = bytes;
  let objectVersion = put.version;
  if (!put.created) {
    const existing = await readArchiveObject(store, key);
    const content = plainOrUndefined(existing, cipher);
    if (content === undefined || sha256(content) !== contentSha256) {
      const found = sha256(existing.stored);
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `${location} already holds different content (sha256 ${found}, expected package ${contentSha256}); it was not overwritten: an operator must decide which one is right, then retry`,
        { details: { key, location, found, expected: contentSha256 } },
      );
    }
    stored = existing.stored;
    objectVersion = existing.objectVersion;
  }
  return {
    key,
    location,
    objectSha256: sha256(stored),
    objectVersion,
    objectSize: stored.length,
    contentSha256,
    contentSize: plain.length,
    encrypted: isSealed(stored),
    keyId: sealedKeyId(stored) ?? null,
    outcome: put.created ? 'created' : 'identical',
  };
}
