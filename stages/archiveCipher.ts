import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { inspect } from 'node:util';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** The environment variable that names the archive key file. */
export const ARCHIVE_KEY_FILE_ENV = 'OPSTATE_ARCHIVE_KEY_FILE';

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
        `object was sealed with key ${keyId}, but the configured key is ${this.keyId}; point ${ARCHIVE_KEY_FILE_ENV} at the key that sealed it`,
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
 * The cipher named by `OPSTATE_ARCHIVE_KEY_FILE`, or undefined when it is not set (archives are
 * then stored in the clear).
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
  return path === undefined || path === '' ? undefined : loadArchiveCipher(path);
}
