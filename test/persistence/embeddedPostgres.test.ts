import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { LocationType } from '../../machines/routing.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { startEmbeddedPostgres } from '../../persistence/embeddedPostgres.ts';
import { migrate } from '../../persistence/migrate.ts';
import { openDatabase } from '../../persistence/openDatabase.ts';
import { REPO_ROOT } from '../helpers/opstateCli.ts';
import { MIGRATIONS } from './fixtures.ts';

/**
 * The embedded default: a real Postgres started privately from the binaries an npm package
 * ships, on a Unix socket, in the data folder; as root (the server runs as another user) and as a
 * normal user; and again after the process that started it was killed.
 */
const CHILD = fileURLToPath(new URL('./fixtures/embeddedPostgresChild.ts', import.meta.url));
const run = promisify(execFile);

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A live process (a zombie, killed but not yet reaped by its new parent, is not). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function freshDir(): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'opstate-embedded-pg-'));
  await chmod(dir, 0o711); // as root, the server's user must reach the data folder
  return dir;
}

describe('the embedded Postgres server', () => {
  it('opens by default without a URL, keeps data across a restart, and listens on no TCP port', async () => {
    const root = await freshDir();
    const first = await openDatabase({ dataDir: root });
    try {
      expect(first.dialect).toBe('postgres');
      expect(await migrate(first)).toEqual({ applied: MIGRATIONS, total: MIGRATIONS });
      const [row] = await first.execute<{ tcp: string; port: number | null }>(
        "select current_setting('listen_addresses') as tcp, inet_server_port() as port",
      );
      expect(row).toEqual({ tcp: '', port: null });
      await new ArtifactRepository(first).addLocation({
        site: 'disk',
        name: 'buffer',
        locationType: LocationType.BUFFER,
        storageRoot: '/b',
      });
    } finally {
      await first.close();
    }
    expect(existsSync(join(root, 'postgres', 'postmaster.pid'))).toBe(false);
    const again = await openDatabase({ dataDir: root });
    try {
      expect(await migrate(again)).toEqual({ applied: 0, total: MIGRATIONS });
      expect(await new ArtifactRepository(again).findLocation('disk', 'buffer')).toBeDefined();
    } finally {
      await again.close();
    }
  });

  it('starts again after the process that started it was killed, stopping the server it left', async () => {
    const root = await freshDir();
    const dataDir = join(root, 'postgres');
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dataDir, 'hold'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const first = await new Promise<{ pid: number }>((resolve, reject) => {
      child.stdout?.once('data', (b: Buffer) =>
        resolve(JSON.parse(b.toString()) as { pid: number }),
      );
      child.once('exit', (code) => reject(new Error(`the child exited ${code} before starting`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(running(first.pid)).toBe(true); // the orphaned postmaster
    const orphanSockets = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[4];
    expect(orphanSockets && existsSync(orphanSockets)).toBe(true);
    const server = await startEmbeddedPostgres({ dataDir });
    try {
      expect(running(first.pid)).toBe(false);
      expect(existsSync(orphanSockets as string)).toBe(false); // its private socket folder too
      const database = await openDatabase({ databaseUrl: server.url, max: 1 });
      expect(await migrate(database)).toEqual({ applied: 0, total: MIGRATIONS });
      await database.close();
    } finally {
      await server.stop();
    }
  });

  it('runs as a normal user', async () => {
    const root = await freshDir();
    const { stdout: uid } = await run('id', ['-u', 'nobody']);
    const { stdout: gid } = await run('id', ['-g', 'nobody']);
    await chown(root, Number(uid), Number(gid));
    const { stdout } = await run(
      'runuser',
      ['-u', 'nobody', '--', process.execPath, '--import', 'tsx', CHILD, join(root, 'pg'), 'stop'],
      { cwd: REPO_ROOT, env: { ...process.env, HOME: root } },
    );
    expect(JSON.parse(stdout)).toMatchObject({ applied: MIGRATIONS, uid: Number(uid) });
  });
});
