import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, reachable } from '../../chaos/privateServers.ts';
import { waitFor } from './waitFor.ts';

const run = promisify(execFile);

/** Debian's OpenSSH server (package `openssh-server`; `.ci/run` installs it). */
export const SSHD = '/usr/sbin/sshd';

/** The OpenSSH `SHA256:<base64>` fingerprint of a public key line (`ssh-ed25519 AAAA… comment`). */
function fingerprintOf(publicKeyLine: string): string {
  const blob = Buffer.from(publicKeyLine.trim().split(/\s+/)[1] ?? '', 'base64');
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

async function keyPair(path: string): Promise<string> {
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'opstate-test', '-f', path]);
  return readFile(`${path}.pub`, 'utf8');
}

/**
 * A private OpenSSH server for one test file (fails, never skips, when sshd is not installed): its own host key, one authorized client key, on a
 * free port of 127.0.0.1 only, SFTP by `internal-sftp`, no password or keyboard login; files it
 * serves live under `root` (a fresh folder). Stopped with `stop()`, which also removes its folder.
 */
export class PrivateSshd {
  private process: ChildProcess | undefined;
  private output = '';

  private constructor(
    readonly dir: string,
    readonly port: number,
    /** The private key file of the one authorized client (mode 600). */
    readonly clientKeyFile: string,
    /** The server's host key fingerprint, as `ssh-keygen -l` prints it. */
    readonly hostKeySha256: string,
    /** A folder for the server's files. */
    readonly root: string,
  ) {}

  /** Makes the keys and configuration and starts the server; resolves once it accepts connections. */
  static async start(): Promise<PrivateSshd> {
    await access(SSHD).catch(() => {
      throw new Error(
        `${SSHD} is missing: the SFTP store tests need Debian's OpenSSH server (apt-get install -y openssh-server)`,
      );
    });
    const dir = await mkdtemp(join(tmpdir(), 'opstate-sshd-'));
    await chmod(dir, 0o700);
    // sshd refuses to start without its privilege-separation folder.
    await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
    const hostKey = await keyPair(join(dir, 'host_ed25519'));
    const clientKey = await keyPair(join(dir, 'client_ed25519'));
    await writeFile(join(dir, 'authorized_keys'), clientKey, { mode: 0o600 });
    const root = join(dir, 'files');
    await mkdir(root, { mode: 0o700 });
    const server = new PrivateSshd(
      dir,
      await freePort(),
      join(dir, 'client_ed25519'),
      fingerprintOf(hostKey),
      root,
    );
    await server.launch();
    return server;
  }

  /** `sftp://<user>@127.0.0.1:<port><path>`: a storage root on this server. */
  url(path: string): string {
    return `sftp://${userInfo().username}@127.0.0.1:${this.port}${path}`;
  }

  private async launch(): Promise<void> {
    const config = join(this.dir, 'sshd_config');
    await writeFile(
      config,
      [
        `Port ${this.port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${join(this.dir, 'host_ed25519')}`,
        `AuthorizedKeysFile ${join(this.dir, 'authorized_keys')}`,
        `PidFile ${join(this.dir, 'sshd.pid')}`,
        `AllowUsers ${userInfo().username}`,
        'PermitRootLogin prohibit-password',
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        'StrictModes no',
        'Subsystem sftp internal-sftp',
        'LogLevel ERROR',
        '',
      ].join('\n'),
    );
    // -D: stay in the foreground (this process owns it); -e: log to stderr.
    const child = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.process = child;
    child.stdout?.on('data', (d: Buffer) => {
      this.output += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.output += d.toString();
    });
    await waitFor(
      async () => {
        if (child.exitCode !== null) {
          throw new Error(`sshd exited with ${child.exitCode}: ${this.output}`);
        }
        return reachable(this.port);
      },
      `private sshd on port ${this.port}`,
      30_000,
      50,
    );
  }

  /** Stops the server (SIGTERM, then waits for it to exit) and removes its folder. */
  async stop(): Promise<void> {
    const child = this.process;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
