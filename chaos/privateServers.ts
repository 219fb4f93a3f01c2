import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.ts';
import { waitFor } from './waitFor.ts';

export { freePort };

const run = promisify(execFile);
const BIN = '/usr/lib/postgresql/15/bin';

/** Runs a Postgres binary as the `postgres` OS user (Postgres refuses to run as root). */
async function asPostgres(args: string[], timeoutMs = 60_000) {
  try {
    return await run('runuser', ['-u', 'postgres', '--', ...args], { timeout: timeoutMs });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(
      `${args.join(' ')} failed: ${e.stderr || e.stdout || e.message} (needs the postgresql-15 package and the postgres user)`,
    );
  }
}

/**
 * A Postgres cluster of a test's own — `initdb` into a temporary folder, listening on a free port
 * of 127.0.0.1, run as the `postgres` OS user — that a drill may restart (fast or immediate) or
 * stop without touching the shared server other tests run on.
 *
 * @example
 * ```ts
 * const pg = await PrivatePostgres.create(); await pg.start();
 * const url = pg.url('postgres'); await pg.restart('immediate'); await pg.dispose();
 * ```
 */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  static async create(): Promise<PrivatePostgres> {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-pg-'));
    await chmod(dir, 0o700);
    const { uid, gid } = await postgresIds();
    await chown(dir, uid, gid);
    await asPostgres([
      `${BIN}/initdb`,
      '-D',
      join(dir, 'data'),
      '-A',
      'trust',
      '-U',
      'postgres',
      '--no-sync',
    ]);
    return new PrivatePostgres(await freePort(), dir);
  }

  /** A URL for `database` on this cluster. */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Starts it; `settings` add server settings, e.g. `{ ssl: 'on', ssl_cert_file: '/…' }`. */
  async start(settings: Record<string, string> = {}): Promise<void> {
    this.settings = settings;
    await this.pgCtl('start', ['-l', join(this.dir, 'log'), '-o', this.serverOptions()]);
    await waitFor(() => reachable(this.port), `private Postgres on port ${this.port}`, 30_000, 50);
  }

  /**
   * Restarts with shutdown mode `fast` (sessions terminated) or `immediate` (a crash and recovery),
   * with the settings it was started with.
   */
  async restart(mode: 'fast' | 'immediate'): Promise<void> {
    await this.pgCtl('restart', [
      '-m',
      mode,
      '-l',
      join(this.dir, 'log'),
      '-o',
      this.serverOptions(),
    ]);
    await waitFor(
      () => reachable(this.port),
      `private Postgres back on port ${this.port}`,
      30_000,
      50,
    );
  }

  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.pgCtl('stop', ['-m', mode]).catch(() => undefined);
  }

  /**
   * A streaming standby of `primary` (which must run): `pg_basebackup -R` through a replication
   * slot named `slot` into a folder of its own, on a free port. Not started; started with
   * `cluster_name` set, its walreceiver streams under that name (the one a primary's
   * `synchronous_standby_names` lists).
   */
  static async standbyOf(primary: PrivatePostgres, slot: string): Promise<PrivatePostgres> {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-pg-standby-'));
    await chmod(dir, 0o700);
    const { uid, gid } = await postgresIds();
    await chown(dir, uid, gid);
    await asPostgres([
      `${BIN}/pg_basebackup`,
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-D',
      join(dir, 'data'),
      '-X',
      'stream',
      '-C',
      '-S',
      slot,
      '-R',
      '--checkpoint=fast',
      '--no-sync',
    ]);
    return new PrivatePostgres(await freePort(), dir);
  }

  /**
   * SIGKILL to the postmaster and every process it started, at once: the server's machine lost,
   * not a shutdown (no backend says goodbye to its clients, no checkpoint).
   */
  async kill(): Promise<void> {
    const pid = await this.postmasterPid();
    if (pid === undefined) return;
    const all = [pid, ...(await childrenOf(pid))];
    for (const p of all) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await waitFor(
      async () => !(await reachable(this.port)) && all.every((p) => !alive(p)),
      `the killed Postgres on port ${this.port} to be gone`,
      30_000,
      20,
    );
    // Gone as after a lost machine, its lock files left behind. Where nothing reaps orphans (a
    // container's first process may not), the dead postmaster stays a zombie under its PID, and
    // the next start would take the lock files for a live server's.
    await rm(join(this.dir, 'data', 'postmaster.pid'), { force: true });
    await rm(join(this.dir, `.s.PGSQL.${this.port}.lock`), { force: true });
  }

  /** `psql -Atc sql` on `database`: the rows as text, one a line, columns split by `|`. */
  async psql(sql: string, database = 'postgres'): Promise<string> {
    const args = ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', '-d', database];
    const { stdout } = await asPostgres([`${BIN}/psql`, ...args, '-X', '-Atc', sql], 10_000);
    return stdout.trim();
  }

  /** `pg_ctl promote` (waiting for it): a standby ends recovery and takes writes. */
  async promote(): Promise<void> {
    await this.pgCtl('promote', []);
  }

  private async postmasterPid(): Promise<number | undefined> {
    try {
      const text = await readFile(join(this.dir, 'data', 'postmaster.pid'), 'utf8');
      const pid = Number(text.split('\n')[0]);
      return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  private settings: Record<string, string> = {};

  private serverOptions(): string {
    const extra = Object.entries(this.settings)
      .map(([k, v]) => ` -c ${k}=${v}`)
      .join('');
    return `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c fsync=off -c max_connections=200${extra}`;
  }

  /** `pg_ctl <action>` on this cluster's data folder, as the postgres user, waiting for it. */
  private pgCtl(
    action: 'start' | 'restart' | 'stop' | 'promote',
    args: string[],
  ): Promise<unknown> {
    return asPostgres([`${BIN}/pg_ctl`, '-D', join(this.dir, 'data'), '-w', ...args, action]);
  }

  async dispose(): Promise<void> {
    await this.stop('immediate');
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** The processes whose parent is `pid` (from /proc). */
async function childrenOf(pid: number): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid …; comm may hold spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // exited while listed
    }
  }
  return found;
}

/** Whether `pid` runs (a zombie nobody reaped yet counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** The `postgres` OS user's uid and gid (to hand it files such as a TLS key). */
export async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const { stdout: uid } = await run('id', ['-u', 'postgres']);
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
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

/** How much of a nats-server's stderr is kept to explain an exit. */
const LOG_TAIL = 4096;

/** A nats-server child process with JetStream on a free port and its own store dir. */
export class NatsServerProcess {
  #child: ChildProcess | undefined;
  #log = '';
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
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...options.env } },
    );
    this.#child = child;
    this.#log = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.#log = (this.#log + chunk).slice(-LOG_TAIL);
    });
    // Generous: on a busy machine a server's start (its store's recovery included) takes seconds.
    // A server that exited (its port taken, a bad flag) fails the wait at once, saying so.
    await waitFor(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(
            `nats-server for port ${this.port} exited (${child.exitCode ?? child.signalCode}) before it listened: ${this.lastWords()}`,
          );
        }
        return reachable(this.port);
      },
      `nats-server on port ${this.port}`,
      60_000,
      50,
    );
  }

  /** The end of what the server last wrote to stderr (its log), for an error to quote. */
  lastWords(): string {
    return this.#log.trim().split('\n').slice(-3).join(' | ') || '(nothing logged)';
  }

  /** The running server's process id (its CPU time is read from /proc by the benches). */
  get pid(): number | undefined {
    return this.running ? this.#child?.pid : undefined;
  }

  /** Whether the server process runs. */
  get running(): boolean {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** A crash and a start on the same port and store (what the broker kept survives). */
  async restart(options: { args?: string[]; env?: Record<string, string> } = {}): Promise<void> {
    await this.kill();
    await this.start(options);
  }

  /** Sends `signal` to the running server (SIGSTOP freezes it, SIGCONT wakes it). */
  signal(signal: NodeJS.Signals): void {
    const child = this.#child;
    if (!child || child.exitCode !== null)
      throw new Error(`nats-server on ${this.port} is not running`);
    child.kill(signal);
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

/** What a server's monitoring endpoint says of the JetStream cluster (`/jsz`). */
interface Jsz {
  readonly meta_cluster?: {
    readonly leader?: string;
    /** The leader's view of its followers (the leader alone reports them). */
    readonly replicas?: readonly { readonly name: string; readonly current?: boolean }[];
  };
  readonly account_details?: readonly {
    readonly stream_detail?: readonly {
      readonly name: string;
      readonly cluster?: { readonly leader?: string };
    }[];
  }[];
}

/**
 * Three nats-servers with JetStream in one cluster on loopback ports, each with its own store,
 * named `n1`–`n3`, each serving monitoring (`/jsz`) so a drill can find the leaders. A node can
 * be killed (SIGKILL), frozen (SIGSTOP) and brought back on its own store.
 */
export class NatsClusterProcess {
  private constructor(
    readonly nodes: readonly NatsServerProcess[],
    private readonly routePorts: readonly number[],
    private readonly monitorPorts: readonly number[],
    readonly name: string,
  ) {}

  static async create(size = 3): Promise<NatsClusterProcess> {
    const nodes: NatsServerProcess[] = [];
    const routes: number[] = [];
    const monitors: number[] = [];
    for (let i = 0; i < size; i++) {
      nodes.push(await NatsServerProcess.create());
      routes.push(await freePort());
      monitors.push(await freePort());
    }
    return new NatsClusterProcess(nodes, routes, monitors, `c${process.pid}`);
  }

  /** Every node's client URL, comma-separated, as `NATS_URL` takes them. */
  get url(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  /** The server name of node `i` (`n1`…). */
  nameOf(i: number): string {
    return `n${i + 1}`;
  }

  /** The index of the node named `name`. */
  indexOf(name: string): number {
    const i = Number(name.slice(1)) - 1;
    if (!(i >= 0 && i < this.nodes.length)) throw new Error(`no node named ${name}`);
    return i;
  }

  private args(i: number): string[] {
    const routes = this.routePorts.map((p) => `nats-route://127.0.0.1:${p}`).join(',');
    return [
      '--name',
      this.nameOf(i),
      '--cluster_name',
      this.name,
      '--cluster',
      `nats://127.0.0.1:${this.routePorts[i]}`,
      '--routes',
      routes,
      '-m',
      String(this.monitorPorts[i]),
    ];
  }

  /**
   * Starts every node, then waits until the cluster has a JetStream meta leader that sees every
   * other node as a current peer: before that, a stream of three replicas finds "no suitable
   * peers for placement" (seen on a busy machine, where the last node joins seconds later).
   */
  async start(): Promise<void> {
    await Promise.all(this.nodes.map((n, i) => n.start({ args: this.args(i) })));
    const followers = this.nodes.length - 1;
    await waitFor(
      async () => {
        this.throwIfAnyExited();
        return (
          (await this.ask('', (jsz) => {
            const meta = jsz.meta_cluster;
            const current = (meta?.replicas ?? []).filter((r) => r.current === true).length;
            return current >= followers ? meta?.leader : undefined;
          })) !== undefined
        );
      },
      `a JetStream meta leader with ${followers} current peers`,
      90_000,
      100,
      () => this.nodes.map((n, i) => `${this.nameOf(i)}: ${n.lastWords()}`).join('\n'),
    );
  }

  /**
   * A node that exited while the cluster forms fails the wait at once, with its last log lines: a
   * nats-server whose cluster port is taken listens for clients first and exits after.
   */
  private throwIfAnyExited(): void {
    this.nodes.forEach((node, i) => {
      if (!node.running) {
        throw new Error(
          `node ${this.nameOf(i)} (client ${node.port}, route ${this.routePorts[i]}, monitor ${this.monitorPorts[i]}) exited while the cluster formed: ${node.lastWords()}`,
        );
      }
    });
  }

  /** Starts node `i` again on its own store. */
  async startNode(i: number): Promise<void> {
    await this.node(i).start({ args: this.args(i) });
  }

  private node(i: number): NatsServerProcess {
    const node = this.nodes[i];
    if (node === undefined) throw new Error(`no node ${i}`);
    return node;
  }

  readonly #frozen = new Set<number>();

  /** The first answer of a running, unfrozen node's `/jsz` that `pick` finds something in. */
  private async ask(query: string, pick: (jsz: Jsz) => string | undefined) {
    for (let i = 0; i < this.nodes.length; i++) {
      if (!this.node(i).running || this.#frozen.has(i)) continue;
      try {
        const res = await fetch(`http://127.0.0.1:${this.monitorPorts[i]}/jsz${query}`, {
          signal: AbortSignal.timeout(2000),
        });
        const found = pick((await res.json()) as Jsz);
        if (found !== undefined && found !== '') return found;
      } catch {
        // this node does not answer (starting); ask the next one
      }
    }
    return undefined;
  }

  /** The JetStream meta leader's name as a running node reports it, if one is elected. */
  metaLeader(): Promise<string | undefined> {
    return this.ask('', (jsz) => jsz.meta_cluster?.leader);
  }

  /** The leader of `stream` as a running node reports it, if one is elected. */
  streamLeader(stream: string): Promise<string | undefined> {
    return this.ask('?accounts=true&streams=true', (jsz) => {
      for (const account of jsz.account_details ?? []) {
        const found = account.stream_detail?.find((s) => s.name === stream);
        if (found !== undefined) return found.cluster?.leader;
      }
      return undefined;
    });
  }

  async kill(i: number): Promise<void> {
    await this.node(i).kill();
  }

  /** SIGSTOP: the node holds its connections but answers nothing. */
  freeze(i: number): void {
    this.node(i).signal('SIGSTOP');
    this.#frozen.add(i);
  }

  thaw(i: number): void {
    this.node(i).signal('SIGCONT');
    this.#frozen.delete(i);
  }

  async dispose(): Promise<void> {
    for (let i = 0; i < this.nodes.length; i++) {
      if (this.node(i).running) this.node(i).signal('SIGCONT');
    }
    await Promise.all(this.nodes.map((n) => n.dispose()));
  }
}
