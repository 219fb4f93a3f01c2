import { createHash, randomUUID } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { posix } from 'node:path';
import { type Clock, systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { ArchiveStore, ArchiveStoreFactory } from './ArchiveStore.ts';
import { checkArchiveKey } from './archiveObject.ts';
import { STALE_TEMPORARY_MS } from './storage.ts';

/** The environment variable naming the private key file an `sftp:` store logs in with. */
export const SFTP_KEY_FILE_ENV = 'OPSTATE_SFTP_KEY_FILE';
/** The environment variable holding the server's host key fingerprint (`SHA256:…`). */
export const SFTP_HOST_KEY_ENV = 'OPSTATE_SFTP_HOST_KEY';

/** The attributes an SFTP v3 server returns (OpenSSH sends no inode and whole-second times). */
interface Attrs {
  readonly size: number;
  readonly mtime: number;
  readonly mode: number;
}
type Done<T> = (err: (Error & { code?: number }) | null | undefined, value: T) => void;
/** The part of ssh2's SFTP session this store uses (ssh2 is an optional dependency, untyped here). */
interface Sftp {
  open(path: string, flags: string, attrs: { mode: number }, cb: Done<Buffer>): void;
  write(handle: Buffer, b: Buffer, off: number, len: number, pos: number, cb: Done<void>): void;
  read(handle: Buffer, b: Buffer, off: number, len: number, pos: number, cb: Done<number>): void;
  ext_openssh_fsync(handle: Buffer, cb: Done<void>): void;
  close(handle: Buffer, cb: Done<void>): void;
  fstat(handle: Buffer, cb: Done<Attrs>): void;
  lstat(path: string, cb: Done<Attrs>): void;
  rename(from: string, to: string, cb: Done<void>): void;
  unlink(path: string, cb: Done<void>): void;
  mkdir(path: string, attrs: { mode: number }, cb: Done<void>): void;
  readdir(path: string, cb: Done<{ filename: string; attrs: Attrs }[]>): void;
}
interface Client {
  once(event: 'ready', fn: () => void): void;
  once(event: 'error', fn: (err: Error) => void): void;
  on(event: 'error', fn: (err: Error) => void): void;
  connect(config: Record<string, unknown>): void;
  sftp(cb: Done<Sftp>): void;
  end(): void;
}

/** SFTP status code 2: no such file. */
const NO_SUCH_FILE = 2;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
/** The temporary files a put writes beside its key: `<name>.partial-` and 8 hex digits. */
const TEMPORARY = /^\.partial-[0-9a-f]{8}$/;
const CHUNK = 32_768;

/** Calls `fn` with a node-style callback and resolves with its value. */
function call<T>(fn: (cb: Done<T>) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
}

/** Null for "no such file"; anything else rethrown. */
async function orNull<T>(promise: Promise<T>): Promise<T | null> {
  return promise.catch((err: { code?: number }) => {
    if (err.code === NO_SUCH_FILE) return null;
    throw err;
  });
}

/**
 * The version of a remote object: size and mtime (seconds), all an SFTP v3 server says of a file
 * (no inode). An object replaced by one of another size, or in another second, has another.
 */
const versionOf = (attrs: Attrs): string => `${attrs.size}:${attrs.mtime}`;

function notAFile(where: string): OpstateError {
  return new OpstateError(
    OpstateErrorCode.BAD_INPUT,
    `${where} is not a regular file (a symlink or a folder stands at the archive key)`,
  );
}

/** The ssh2 module, loaded on first use: it is needed only by those who archive over SFTP. */
async function loadSsh2(): Promise<{ Client: new () => Client }> {
  const name = 'ssh2';
  try {
    const loaded = await import(name);
    return (loaded.default ?? loaded) as { Client: new () => Client };
  } catch (err) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'an sftp: archive location needs the ssh2 package: `npm install ssh2` beside opstate',
      { cause: err },
    );
  }
}

/** A private key file's bytes; `CONFIG` when missing, unreadable or open to every user of the host. */
function readPrivateKey(path: string | undefined): Buffer {
  if (path === undefined || path === '') {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `an sftp: archive location needs a private key file: set ${SFTP_KEY_FILE_ENV} (the password never goes in the URL)`,
    );
  }
  try {
    const mode = statSync(path).mode;
    if ((mode & 0o007) !== 0) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `SFTP key file ${path} is open to every user of this host (mode ${(mode & 0o777).toString(8)}); make it private (\`chmod 600 ${path}\`)`,
      );
    }
    return readFileSync(path);
  } catch (err) {
    if (err instanceof OpstateError) throw err;
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `cannot read SFTP key file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}); ${SFTP_KEY_FILE_ENV} must name a readable file`,
    );
  }
}

/** `%`-decoded text; text that is not valid `%`-encoding as it is. */
function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Where an `sftp://user@host[:port]/path` storage root points; `CONFIG` for anything else. */
function parseLocation(location: string): {
  user: string;
  host: string;
  port: number;
  root: string;
} {
  const url = URL.canParse(location) ? new URL(location) : undefined;
  // Only a root that parsed without a password is echoed (it may be written to logs).
  const shown = url !== undefined && url.password === '' ? `'${location}'` : '(not shown)';
  const bad = (why: string) =>
    new OpstateError(
      OpstateErrorCode.CONFIG,
      `sftp storage root ${shown} ${why}; write it as sftp://user@host[:port]/absolute/folder`,
    );
  if (url === undefined || url.protocol !== 'sftp:' || url.hostname === '') {
    throw bad('is not an sftp:// URL');
  }
  if (url.password !== '') throw bad(`must not carry a password (use ${SFTP_KEY_FILE_ENV})`);
  if (url.username === '') throw bad('names no user');
  if (url.search !== '' || url.hash !== '') throw bad('has a query or fragment');
  // URL parsing resolves '..' silently: a storage root that says it is refused, not reinterpreted.
  const said = safeDecode(location.slice(location.indexOf('//') + 2)).split('/');
  if (said.some((s) => s === '..' || s === '.')) throw bad("has a '.' or '..' segment");
  const root = posix.normalize(safeDecode(url.pathname)).replace(/\/+$/, '');
  if (!root.startsWith('/')) throw bad('needs an absolute folder below /');
  return {
    user: safeDecode(url.username),
    host: url.hostname,
    port: url.port === '' ? 22 : Number(url.port),
    root,
  };
}

/** Options of an SFTP archive store; each defaults to its environment variable. */
export interface SftpArchiveStoreOptions {
  /** The private key file to log in with (default: `OPSTATE_SFTP_KEY_FILE`); not open to others. */
  readonly privateKeyFile?: string;
  /** The server's host key fingerprint, `SHA256:<base64>` (default: `OPSTATE_SFTP_HOST_KEY`). */
  readonly hostKeySha256?: string;
  /** How old a temporary file left by a killed writer must be before a put removes it (1 h). */
  readonly staleTemporaryMs?: number;
  readonly clock?: Clock;
}

/** Writes `body` at the start of the open file `handle`, 32 KiB per request, a chunk's requests at once. */
async function writeAll(
  sftp: Sftp,
  handle: Buffer,
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): Promise<void> {
  let position = 0;
  for await (const chunk of body) {
    const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const writes: Promise<void>[] = [];
    for (let at = 0; at < bytes.length; at += CHUNK) {
      const piece = bytes.subarray(at, at + CHUNK);
      const where = position + at;
      writes.push(call((cb) => sftp.write(handle, piece, 0, piece.length, where, cb)));
    }
    await Promise.all(writes);
    position += bytes.length;
  }
  // fsync@openssh.com: the bytes are on the server's disk before the object appears at its key.
  await call<void>((cb) => sftp.ext_openssh_fsync(handle, cb)).catch((err: Error) => {
    if (!/does not support/i.test(err.message)) throw err;
  });
}

/** Requests a read keeps in flight: one round trip per 32 KiB would cap throughput at latency. */
const READ_AHEAD = 8;

/** `CHUNK` bytes of `handle` from `at` (fewer at the end of the file, none past it). */
function readAt(sftp: Sftp, handle: Buffer, at: number): Promise<Buffer> {
  const buffer = Buffer.alloc(CHUNK);
  return call<number>((cb) => sftp.read(handle, buffer, 0, CHUNK, at, cb)).then(
    (got) => buffer.subarray(0, got),
    (err: { code?: number }) => {
      if (err.code === 1) return buffer.subarray(0, 0); // SSH_FX_EOF
      throw err;
    },
  );
}

/**
 * The bytes of the open file `handle`, in order, `READ_AHEAD` requests ahead; a short read (which
 * a server may give before the end) drops the requests after it and goes on from where it ended.
 * Closes the handle, then calls `end`.
 */
async function* readAll(sftp: Sftp, handle: Buffer, end: () => void): AsyncGenerator<Uint8Array> {
  const inFlight: { at: number; bytes: Promise<Buffer> }[] = [];
  const drain = () => Promise.allSettled(inFlight.splice(0).map((r) => r.bytes));
  let next = 0;
  try {
    for (;;) {
      while (inFlight.length < READ_AHEAD) {
        inFlight.push({ at: next, bytes: readAt(sftp, handle, next) });
        next += CHUNK;
      }
      const { at, bytes } = inFlight.shift() as { at: number; bytes: Promise<Buffer> };
      const piece = await bytes;
      if (piece.length === 0) return;
      if (piece.length < CHUNK) {
        await drain();
        next = at + piece.length;
      }
      yield piece;
    }
  } finally {
    await drain();
    await call<void>((cb) => sftp.close(handle, cb)).catch(() => undefined);
    end();
  }
}

/**
 * The archive store of a folder on an SFTP server (a location whose `storageRoot` is
 * `sftp://user@host[:port]/absolute/folder`): an object is the file `<folder>/<key>`. A put writes
 * a private temporary file `<key>.partial-<8 hex>` created exclusively (CREAT|EXCL), syncs it
 * (`fsync@openssh.com`) and renames it to the key with plain SFTP `RENAME` — which refuses an
 * existing target (SFTP v3; OpenSSH does it by `link()` + `unlink()`), unlike
 * `posix-rename@openssh.com`, which would replace it. So the object appears whole or not at all
 * and is never replaced; a writer killed midway leaves only its temporary file, removed by a later
 * put of that key once older than `staleTemporaryMs` (one hour). On a server whose file system has
 * no hard links OpenSSH falls back to stat-then-rename, which a concurrent writer can race.
 *
 * It logs in with the private key file `privateKeyFile` (or `OPSTATE_SFTP_KEY_FILE`; refused when
 * open to every user of the host) and talks only to a server whose host key has the fingerprint
 * `hostKeySha256` (or `OPSTATE_SFTP_HOST_KEY`); credentials never go in the URL. A version is
 * `<size>:<mtime s>`, all SFTP v3 says of a file: an object replaced by one of the same size
 * within the same second keeps its version (opstate's digest checks still tell the bytes apart).
 * One SSH connection per call; a `read` holds its connection until its body is read or returned.
 * Needs the `ssh2` package (`npm install ssh2`), loaded on first use.
 *
 * @example
 * ```ts
 * // OPSTATE_SFTP_KEY_FILE=/etc/opstate/sftp_ed25519 OPSTATE_SFTP_HOST_KEY=SHA256:…
 * const store = archiveStoreAt('sftp://archiver@tape-gw.example:22/srv/lta');
 * await store.putIfAbsent('raw_data_package/obs-1.tar', [bytes]); // { created: true, version }
 * ```
 */
export class SftpArchiveStore implements ArchiveStore {
  private readonly server: { user: string; host: string; port: number; root: string };
  private readonly keyFile: string | undefined;
  private readonly hostKeySha256: string | undefined;
  private readonly staleTemporaryMs: number;
  private readonly clock: Clock;

  constructor(location: string, options: SftpArchiveStoreOptions = {}) {
    this.server = parseLocation(location);
    this.keyFile = options.privateKeyFile ?? process.env[SFTP_KEY_FILE_ENV];
    this.hostKeySha256 = options.hostKeySha256 ?? process.env[SFTP_HOST_KEY_ENV];
    this.staleTemporaryMs = options.staleTemporaryMs ?? STALE_TEMPORARY_MS;
    this.clock = options.clock ?? systemClock;
  }

  /** The remote path behind a key. */
  private pathOf(key: string): string {
    return posix.join(this.server.root, checkArchiveKey(key));
  }

  describe(key: string): string {
    const { user, host, port } = this.server;
    return `sftp://${encodeURIComponent(user)}@${host}:${port}${this.pathOf(key)}`;
  }

  async putIfAbsent(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<{ created: boolean; version: string }> {
    const path = this.pathOf(key);
    const { sftp, end } = await this.connect();
    try {
      await makeFolders(sftp, posix.dirname(path));
      const temporary = `${path}.partial-${randomUUID().slice(0, 8)}`;
      const handle = await call<Buffer>((cb) => sftp.open(temporary, 'wx', { mode: 0o640 }, cb));
      let created = true;
      try {
        try {
          await writeAll(sftp, handle, body);
        } finally {
          await call<void>((cb) => sftp.close(handle, cb));
        }
        await call<void>((cb) => sftp.rename(temporary, path, cb)).catch(async (err) => {
          // The server says only "failure" when the key is taken: look.
          if ((await orNull(call<Attrs>((cb) => sftp.lstat(path, cb)))) === null) throw err;
          created = false;
        });
      } finally {
        await orNull(call<void>((cb) => sftp.unlink(temporary, cb)));
      }
      const found = await statOf(sftp, path);
      if (found === null) {
        throw new OpstateError(OpstateErrorCode.CONFLICT, `${path} vanished right after its put`, {
          retryable: true,
        });
      }
      await removeStaleTemporaries(sftp, path, this.clock.now() - this.staleTemporaryMs);
      return { created, version: found.version };
    } finally {
      end();
    }
  }

  async read(key: string): Promise<{ version: string; body: AsyncIterable<Uint8Array> } | null> {
    const path = this.pathOf(key);
    const { sftp, end } = await this.connect();
    try {
      // SFTP's open follows symlinks: look first, then check the opened file is the same kind.
      if ((await statOf(sftp, path)) === null) {
        end();
        return null;
      }
      const handle = await call<Buffer>((cb) => sftp.open(path, 'r', { mode: 0 }, cb));
      const attrs = await call<Attrs>((cb) => sftp.fstat(handle, cb));
      if ((attrs.mode & S_IFMT) !== S_IFREG) throw notAFile(path);
      return { version: versionOf(attrs), body: readAll(sftp, handle, end) };
    } catch (err) {
      end();
      throw err;
    }
  }

  async stat(key: string): Promise<{ size: number; version: string } | null> {
    const path = this.pathOf(key);
    const { sftp, end } = await this.connect();
    try {
      return await statOf(sftp, path);
    } finally {
      end();
    }
  }

  /** A logged-in SFTP session with the server, after checking its host key; `end` closes it. */
  private async connect(): Promise<{ sftp: Sftp; end: () => void }> {
    const expected = this.hostKeySha256;
    if (expected === undefined || !expected.startsWith('SHA256:')) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `an sftp: archive location needs the server's host key fingerprint: set ${SFTP_HOST_KEY_ENV} to the SHA256:… that \`ssh-keyscan -p ${this.server.port} ${this.server.host} | ssh-keygen -lf -\` prints (checked on the server)`,
      );
    }
    const privateKey = readPrivateKey(this.keyFile);
    const { Client } = await loadSsh2();
    const client = new Client();
    const { user, host, port } = this.server;
    let offered: string | undefined;
    await new Promise<void>((resolve, reject) => {
      client.once('ready', resolve);
      client.once('error', (err) =>
        reject(
          offered !== undefined && offered !== expected
            ? new OpstateError(
                OpstateErrorCode.CONFIG,
                `the SFTP server ${host}:${port} offered host key ${offered}, not ${expected} (${SFTP_HOST_KEY_ENV}); refused`,
              )
            : new OpstateError(
                OpstateErrorCode.TRANSPORT,
                `cannot log in to ${user}@${host}:${port} over SFTP: ${err.message}`,
                { retryable: true, cause: err },
              ),
        ),
      );
      client.connect({
        host,
        port,
        username: user,
        privateKey,
        readyTimeout: 30_000,
        hostVerifier: (key: Buffer) => {
          offered = `SHA256:${createHash('sha256').update(key).digest('base64').replace(/=+$/, '')}`;
          return offered === expected;
        },
      });
    });
    // A connection lost later fails the request in flight; nothing else listens for it.
    client.on('error', () => undefined);
    const end = () => client.end();
    try {
      return { sftp: await call<Sftp>((cb) => client.sftp(cb)), end };
    } catch (err) {
      end();
      throw err;
    }
  }
}

/** The size and version of the regular file at `path`, null when there is none. */
async function statOf(sftp: Sftp, path: string): Promise<{ size: number; version: string } | null> {
  const attrs = await orNull(call<Attrs>((cb) => sftp.lstat(path, cb)));
  if (attrs === null) return null;
  if ((attrs.mode & S_IFMT) !== S_IFREG) throw notAFile(path);
  return { size: attrs.size, version: versionOf(attrs) };
}

/** `mkdir -p` of `folder` on the server (mode 750). */
async function makeFolders(sftp: Sftp, folder: string): Promise<void> {
  let at = '/';
  for (const segment of folder.split('/').filter((s) => s !== '')) {
    at = posix.join(at, segment);
    if ((await orNull(call<Attrs>((cb) => sftp.lstat(at, cb)))) !== null) continue;
    await call<void>((cb) => sftp.mkdir(at, { mode: 0o750 }, cb)).catch(async (err) => {
      // Another writer may have made it meanwhile.
      if ((await orNull(call<Attrs>((cb) => sftp.lstat(at, cb)))) === null) throw err;
    });
  }
}

/** Removes the temporary files of `path` older than `olderThan` (ms since the epoch). */
async function removeStaleTemporaries(sftp: Sftp, path: string, olderThan: number): Promise<void> {
  const base = posix.basename(path);
  const entries = await call<{ filename: string; attrs: Attrs }[]>((cb) =>
    sftp.readdir(posix.dirname(path), cb),
  );
  for (const { filename, attrs } of entries) {
    if (!filename.startsWith(base) || !TEMPORARY.test(filename.slice(base.length))) continue;
    if (attrs.mtime * 1000 >= olderThan) continue;
    await orNull(call<void>((cb) => sftp.unlink(posix.join(posix.dirname(path), filename), cb)));
  }
}

/**
 * The factory of the SFTP store, registered for `sftp` by default: storage roots
 * `sftp://user@host[:port]/absolute/folder`, credentials from `OPSTATE_SFTP_KEY_FILE` and
 * `OPSTATE_SFTP_HOST_KEY`.
 *
 * @example
 * ```ts
 * sftpArchiveStore('sftp://lta@10.0.0.5/srv/lta', { clock: systemClock }).describe('k');
 * // 'sftp://lta@10.0.0.5:22/srv/lta/k'
 * ```
 */
export const sftpArchiveStore: ArchiveStoreFactory = (location, { clock }) =>
  new SftpArchiveStore(location, { clock });
