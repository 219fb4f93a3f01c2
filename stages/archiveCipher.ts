import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { inspect } from 'node:util';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** The environment variable that names the archive key file. */
export const ARCHIVE_KEY_FILE_ENV = 'OPSTATE_ARCHIVE_KEY_FILE';

/**
 * The environment variable that names older archive key files, comma-separated: they open the
 * archives they sealed, never seal a new one (the keyring after a rotation).
 */
export const ARCHIVE_READ_KEY_FILES_ENV = 'OPSTATE_ARCHIVE_READ_KEY_FILES';

/** How a sealed object starts: magic, format version, key id, IV, tag, then the ciphertext. */
const MAGIC = Buffer.from('OPSTAEAD');
const FORMAT = 1;
const KEY_ID_BYTES = 8;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER = MAGIC.length + 1 + KEY_ID_BYTES;

/**
 * Encrypts archive objects at rest with AES-256-GCM (`node:crypto`). The key never leaves this
 * object: it is not a property, `JSON.stringify` and `util.inspect` show only `keyId`, a one-way
 * fingerprint that names which key sealed an object.
 */
export interface ArchiveCipher {
  /** 16 hex characters identifying the key; safe to record and print. */
  readonly keyId: string;
  /** Encrypts: magic ‖ version ‖ key id ‖ random IV ‖ tag ‖ ciphertext; the header is authenticated. */
  seal(plain: Uint8Array): Buffer;
  /** Decrypts and authenticates; an altered, truncated or foreign-key object is a `BAD_INPUT`. */
  open(sealed: Uint8Array): Buffer;
  /** Every key id this cipher can open, the sealing key first. */
  readonly keyIds?: readonly string[];
}

/**
 * Whether bytes are a sealed archive object (they start with the magic).
 *
 * @example
 * ```ts
 * if (isSealed(bytes) && cipher === undefined) throw new Error('set OPSTATE_ARCHIVE_KEY_FILE');
 * ```
 */
export function isSealed(bytes: Uint8Array): boolean {
  return bytes.length >= MAGIC.length && Buffer.from(bytes.subarray(0, MAGIC.length)).equals(MAGIC);
}

/**
 * The key id a sealed object names (hex), or undefined for plain bytes.
 *
 * @example
 * ```ts
 * sealedKeyId(await readFile(path)); // 'a1b2c3d4e5f60718'
 * ```
 */
export function sealedKeyId(bytes: Uint8Array): string | undefined {
  if (!isSealed(bytes) || bytes.length < HEADER) return undefined;
  return Buffer.from(bytes.subarray(MAGIC.length + 1, HEADER)).toString('hex');
}

function keyIdOf(key: Buffer): string {
  return createHash('sha256')
    .update('opstate archive key id\0')
    .update(key)
    .digest()
    .subarray(0, KEY_ID_BYTES)
    .toString('hex');
}

function parseKey(text: Buffer, path: string): Buffer {
  if (text.length === 32) return Buffer.from(text);
  const trimmed = text.toString('utf8').trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  const decoded = Buffer.from(trimmed, 'base64');
  if (decoded.length === 32 && /^[A-Za-z0-9+/]+={0,2}$/.test(trimmed)) return decoded;
  throw new OpstateError(
    OpstateErrorCode.CONFIG,
    `archive key file ${path} must hold a 256-bit key: 32 raw bytes, 64 hex characters or 44 base64 characters (e.g. \`openssl rand -hex 32 > ${path}\`)`,
  );
}

class AesGcmCipher implements ArchiveCipher {
  readonly keyId: string;
  readonly #key: Buffer;

  constructor(key: Buffer) {
    this.#key = key;
    this.keyId = keyIdOf(key);
  }

  seal(plain: Uint8Array): Buffer {
    const header = Buffer.concat([MAGIC, Buffer.from([FORMAT]), Buffer.from(this.keyId, 'hex')]);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(header);
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([header, iv, cipher.getAuthTag(), body]);
  }

  open(sealed: Uint8Array): Buffer {
    const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    if (!isSealed(bytes) || bytes.length < HEADER + IV_BYTES + TAG_BYTES) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        'object is not a sealed archive object (no header, or shorter than one): it was truncated or written by something else',
      );
    }
    if (bytes[MAGIC.length] !== FORMAT) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `sealed object has format ${bytes[MAGIC.length]}, this build reads format ${FORMAT}`,
      );
    }
    const keyId = sealedKeyId(bytes);
    if (keyId !== this.keyId) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `object was sealed with key ${keyId}, but the configured key is ${this.keyId}; point ${ARCHIVE_KEY_FILE_ENV} at the key that sealed it, or name it in ${ARCHIVE_READ_KEY_FILES_ENV}`,
        { details: { objectKeyId: keyId, configuredKeyId: this.keyId } },
      );
    }
    const iv = bytes.subarray(HEADER, HEADER + IV_BYTES);
    const tag = bytes.subarray(HEADER + IV_BYTES, HEADER + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
    decipher.setAAD(bytes.subarray(0, HEADER));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([
        decipher.update(bytes.subarray(HEADER + IV_BYTES + TAG_BYTES)),
        decipher.final(),
      ]);
    } catch {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        'sealed object fails authentication: it was altered or truncated after it was written',
      );
    }
  }

  toJSON(): { keyId: string } {
    return { keyId: this.keyId };
  }

  [inspect.custom](): string {
    return `ArchiveCipher { keyId: '${this.keyId}' }`;
  }
}

/**
 * An AES-256-GCM cipher from a key file: 32 raw bytes, 64 hex characters or base64 of 32 bytes.
 * `CONFIG` when the file is missing, malformed, or open to every user of the host (any permission
 * for others: `chmod 600` it); the message names the file, never its content.
 *
 * @example
 * ```ts
 * const cipher = loadArchiveCipher('/etc/opstate/archive.key');
 * cipher.keyId; // safe to print
 * ```
 */
export function loadArchiveCipher(path: string): ArchiveCipher {
  let text: Buffer;
  try {
    // A key others on the host can read is a key anyone there can use: refused, never used.
    const mode = statSync(path).mode;
    if ((mode & 0o007) !== 0) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `archive key file ${path} is open to every user of this host (mode ${(mode & 0o777).toString(8)}); make it private (\`chmod 600 ${path}\`) and set ${ARCHIVE_KEY_FILE_ENV} again`,
      );
    }
    text = readFileSync(path);
  } catch (err) {
    if (err instanceof OpstateError) throw err;
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `cannot read archive key file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}); ${ARCHIVE_KEY_FILE_ENV} must name a readable file`,
    );
  }
  return new AesGcmCipher(parseKey(text, path));
}

/**
 * Several keys: the first seals, every one opens what it sealed, chosen by the key id in the
 * sealed header. An object sealed under a key not in the ring is a `CONFIG` naming that key id.
 */
class ArchiveKeyring implements ArchiveCipher {
  readonly keyId: string;
  readonly keyIds: readonly string[];
  readonly #byId: ReadonlyMap<string, ArchiveCipher>;

  constructor(ciphers: readonly ArchiveCipher[]) {
    const [sealing] = ciphers;
    if (sealing === undefined) throw new Error('a keyring needs a key');
    this.keyId = sealing.keyId;
    this.keyIds = ciphers.map((c) => c.keyId);
    this.#byId = new Map(ciphers.map((c) => [c.keyId, c]));
  }

  seal(plain: Uint8Array): Buffer {
    return (this.#byId.get(this.keyId) as ArchiveCipher).seal(plain);
  }

  open(sealed: Uint8Array): Buffer {
    const keyId = sealedKeyId(sealed);
    const cipher = keyId === undefined ? undefined : this.#byId.get(keyId);
    if (cipher !== undefined) return cipher.open(sealed);
    if (keyId === undefined) return (this.#byId.get(this.keyId) as ArchiveCipher).open(sealed);
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `object was sealed with key ${keyId}, which no configured key matches (configured: ${this.keyIds.join(', ')}); add the key file that sealed it to ${ARCHIVE_READ_KEY_FILES_ENV}`,
      { details: { objectKeyId: keyId, configuredKeyIds: [...this.keyIds] } },
    );
  }

  toJSON(): { keyId: string; keyIds: readonly string[] } {
    return { keyId: this.keyId, keyIds: this.keyIds };
  }

  [inspect.custom](): string {
    return `ArchiveKeyring { keyId: '${this.keyId}', keyIds: [${this.keyIds.map((k) => `'${k}'`).join(', ')}] }`;
  }
}

/**
 * A keyring from the sealing key file and older read key files (each loaded as by
 * `loadArchiveCipher`): new archives are sealed under the first, an archive sealed under any of
 * them opens. `CONFIG` when a file is missing or malformed, or when two files hold the same key.
 *
 * @example
 * ```ts
 * const ring = loadArchiveKeyring('/etc/opstate/2027.key', ['/etc/opstate/2026.key']);
 * ring.keyIds; // ['<2027 id>', '<2026 id>']
 * ```
 */
export function loadArchiveKeyring(
  sealingPath: string,
  readPaths: readonly string[],
): ArchiveCipher {
  const paths = [sealingPath, ...readPaths];
  const ciphers = paths.map((path) => loadArchiveCipher(path));
  ciphers.forEach((cipher, i) => {
    const first = ciphers.findIndex((c) => c.keyId === cipher.keyId);
    if (first !== i) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `archive key files ${paths[first]} and ${paths[i]} hold the same key (key id ${cipher.keyId}); name each key once in ${ARCHIVE_KEY_FILE_ENV} and ${ARCHIVE_READ_KEY_FILES_ENV}`,
      );
    }
  });
  return ciphers.length === 1 ? (ciphers[0] as ArchiveCipher) : new ArchiveKeyring(ciphers);
}

/**
 * The cipher named by `OPSTATE_ARCHIVE_KEY_FILE` (with the older keys of
 * `OPSTATE_ARCHIVE_READ_KEY_FILES`, comma-separated, as a keyring), or undefined when it is not
 * set (archives are then stored in the clear). Read keys without a sealing key are a `CONFIG`.
 *
 * @example
 * ```ts
 * const cipher = archiveCipherFromEnv(); // ArchiveCipher | undefined
 * ```
 */
export function archiveCipherFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): ArchiveCipher | undefined {
  const path = env[ARCHIVE_KEY_FILE_ENV];
  const readPaths = (env[ARCHIVE_READ_KEY_FILES_ENV] ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (path === undefined || path === '') {
    if (readPaths.length === 0) return undefined;
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `${ARCHIVE_READ_KEY_FILES_ENV} names older keys, but ${ARCHIVE_KEY_FILE_ENV} (the key that seals new archives) is not set; set it too`,
    );
  }
  return loadArchiveKeyring(path, readPaths);
}
