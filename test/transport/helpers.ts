import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { waitFor } from '../helpers/waitFor.ts';

export { waitFor };

/** An observation window (to show that something does NOT happen), never a wait for a condition. */
export function observe(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A promise with its resolver, to hold a handler until the test releases it. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

let counter = 0;
/** A prefix unique to this process and call, so test files and runs never share streams. */
export function uniquePrefix(tag: string): string {
  counter++;
  return `t_${tag}_${process.pid}_${counter}_${Math.random().toString(36).slice(2, 8)}`;
}

/** Whether something listens on host:port. */
export function reachable(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () => done(true));
  });
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** A nats-server child process with JetStream on a free port and its own store dir. */
export class NatsServerProcess {
  #child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    readonly storeDir: string,
  ) {}

  static async create(): Promise<NatsServerProcess> {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-nats-'));
    return new NatsServerProcess(await freePort(), dir);
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts it; `args` add to (and override) the flags, e.g. `['-c', 'nats.conf']`. */
  async start(options: { args?: string[]; env?: Record<string, string> } = {}): Promise<void> {
    const child = spawn(
      '/usr/sbin/nats-server',
      [
        ...(options.args ?? []),
        '-a',
        '127.0.0.1',
        '-p',
        String(this.port),
        '-js',
        '-sd',
        this.storeDir,
      ],
      { stdio: 'ignore', env: { ...process.env, ...options.env } },
    );
    this.#child = child;
    await waitFor(() => reachable(this.port), `nats-server on port ${this.port}`, 15_000, 50);
  }

  /** SIGKILL: no clean shutdown, as in a crash. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGKILL');
    await exited;
    this.#child = undefined;
  }

  async dispose(): Promise<void> {
    await this.kill();
    await rm(this.storeDir, { recursive: true, force: true });
  }
}
