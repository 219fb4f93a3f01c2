import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { openDatabase } from '../../persistence/openDatabase.ts';
import { redactUrl } from '../../transport/jetstream/natsCredentials.ts';
import { HANDLERS, NATS_URL } from '../actors/harness.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { freePort } from '../transport/helpers.ts';

/**
 * What a command does when a setting is missing or a server is down: it says which database and
 * transport it uses, a read never creates a database, a long-running process without NATS_URL
 * refuses to start unless told --in-process, operator commands need only the database, and a
 * port in use is one line. Against real Postgres and NATS; processes only where the behaviour is
 * about a process.
 */
interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

const VERSION = (
  JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

/** `opstate <args>` in this process, with the environment set for the call. */
async function opstate(args: string[], env: Record<string, string>): Promise<Result> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  const out: string[] = [];
  const err: string[] = [];
  try {
    const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, stdout: out.join('\n'), stderr: err.join('\n') };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/**
 * `opstate <args>` as a process of the built package, until it exits, or, if it starts serving
 * instead of refusing (it prints `started` or `dashboard at`), until it is stopped.
 */
async function processOf(args: string[], env: Record<string, string>): Promise<Result> {
  const child = spawn(process.execPath, opstateArgs(args), {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += String(d);
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += String(d);
  });
  const exited = new Promise<number>((resolve) => {
    child.once('exit', (code, signal) => {
      if (signal !== null) stderr += `\n(killed by ${signal})`;
      resolve(code ?? (signal === null ? -1 : 128));
    });
  });
  let code: number | undefined;
  void exited.then((c) => {
    code = c;
  });
  await waitFor(
    // The line a long-running command prints once its signal handlers are in place.
    () =>
      code !== undefined ||
      /^(worker \S+ started for |control plane started|.*dashboard at)/m.test(stdout),
    `opstate ${args.join(' ')} to exit`,
    60_000,
  );
  if (code === undefined) child.kill('SIGTERM');
  return { code: await exited, stdout: stdout.trim(), stderr: stderr.trim() };
}

/** Lines that are a stack trace's. */
const STACK = /^\s+at /m;

let db: TestDatabase;
let dir: string;
/** The test database's URL with a password in it (trust auth ignores it): never printed. */
let urlWithPassword: string;
beforeAll(async () => {
  db = await createTestDatabase('opstate_settings');
  dir = await mkdtemp(join(tmpdir(), 'opstate-settings-'));
  const u = new URL(db.url);
  u.password = 's3cret-pw';
  urlWithPassword = u.toString();
  const migrated = await opstate(['migrate'], { DATABASE_URL: db.url });
  expect(migrated.code, migrated.stderr).toBe(0);
});
afterAll(async () => {
  await dropTestDatabase(db);
  await rm(dir, { recursive: true, force: true });
});

describe('which database and transport, and no database created to read one', () => {
  it('refuses every read on a machine with no database, in one line, creating nothing', async () => {
    const dataDir = join(dir, 'fresh');
    const env = { DATABASE_URL: '', NATS_URL: '', OPSTATE_DATA_DIR: dataDir };
    const id = '0190a8f0-0000-7000-8000-000000000001';
    const reads = [
      ['list'],
      ['list', '--json'],
      ['status', '--json'],
      ['inspect', id],
      ['wait', id, '--timeout', '1s'],
      ['recount'],
      ['policy'],
      ['breaker', 'reset', 'transfer', id],
      ['limit', 'list'],
      ['limit', 'set', '--location', id, '--max', '2'],
      ['limit', 'clear', '--location', id],
      ['archive', 'verify', id],
      ['retry', id],
      ['reset', id],
      ['cancel', id],
    ];
    for (const args of reads) {
      const r = await opstate(args, env);
      const what = `opstate ${args.join(' ')}`;
      expect(r.code, `${what}\n${r.stderr}`).toBe(1);
      expect(r.stdout, what).toBe('');
      expect(r.stderr.split('\n'), what).toEqual([
        `opstate ${args[0]}: no database to read: DATABASE_URL is not set and ${dataDir} holds no embedded database; set DATABASE_URL=postgres://user:password@host:port/db, or OPSTATE_DATA_DIR to the folder of an embedded one`,
      ]);
      expect(existsSync(dataDir), `${what} created ${dataDir}`).toBe(false);
    }
  });

  it('the dashboard is a read too: it refuses before it serves anything', async () => {
    const dataDir = join(dir, 'fresh-dashboard');
    const r = await opstate(['dashboard', '--port', '0'], {
      DATABASE_URL: '',
      NATS_URL: '',
      OPSTATE_DATA_DIR: dataDir,
    });
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr).toMatch(/^opstate dashboard: no database to read: DATABASE_URL is not set/);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('says on stderr which database a command reads, password hidden, and keeps --json stdout clean', async () => {
    const r = await opstate(['list', '--json'], { DATABASE_URL: urlWithPassword, NATS_URL: '' });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([]);
    expect(r.stderr.split('\n')).toEqual([
      `opstate: database ${urlWithPassword.replace(':s3cret-pw@', ':***@')}; no transport (needs only the database)`,
    ]);
    expect(r.stderr).not.toContain('s3cret-pw');
  });
});

describe('operator commands need only the database', () => {
  it('retry, reset and cancel work while NATS is down', async () => {
    const closed = await freePort();
    const env = { DATABASE_URL: db.url, NATS_URL: `nats://127.0.0.1:${closed}` };
    const ok = async (args: string[]) => {
      const r = await opstate(args, env);
      expect(r.code, `opstate ${args.join(' ')}\n${r.stderr}`).toBe(0);
      return r.stdout;
    };
    const pkg = await ok(['artifact', 'add', 'data_transfer_package', '--name', 'down-1']);
    const add = (name: string, type: string) =>
      ok([
        'location',
        'add',
        '--site',
        'down',
        '--name',
        name,
        '--type',
        type,
        '--root',
        `/${name}`,
      ]);
    const source = await add('src', 'source');
    const buffer = await add('buf', 'buffer');
    const fields = JSON.stringify({
      dataTransferPackageId: pkg,
      sourceLocationId: source,
      destinationLocationId: buffer,
    });
    const id = await ok(['submit', 'transfer', '--fields', fields]);

    const cancelled = await opstate(['cancel', id, '--reason', 'broker down', '--json'], env);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ from: 'PENDING', to: 'FAILED' });
    expect(cancelled.stderr).toContain('no transport (needs only the database)');
    expect(JSON.parse(await ok(['retry', id, '--replan', '--json']))).toMatchObject({
      replanned: 'operation',
      status: 'PENDING',
    });
    // A scheduler's move, so that there is something to reset.
    const database = await openDatabase({ databaseUrl: db.url });
    try {
      await new OperationStore(database).apply(
        id,
        { type: 'SCHEDULE', at: new Date().toISOString() },
        { by: 'scheduler' },
      );
    } finally {
      await database.close();
    }
    expect(JSON.parse(await ok(['reset', id, '--reason', 'stuck', '--json']))).toMatchObject({
      from: 'SCHEDULED',
      to: 'PENDING',
    });
  });
});

describe('--version', () => {
  it('prints the package version, in process and from the built package', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await opstate([flag], {});
      expect(r.code, flag).toBe(0);
      expect(r.stdout, flag).toBe(VERSION);
    }
    const built = await processOf(['--version'], {});
    expect(built).toEqual({ code: 0, stdout: VERSION, stderr: '' });
  });
});

describe('long-running processes without NATS_URL', () => {
  it('worker and control-plane refuse to start, naming NATS_URL and --in-process', async () => {
    const env = { DATABASE_URL: db.url, NATS_URL: '' };
    const [worker, plane, inspecting] = await Promise.all([
      processOf(['worker', '--kinds', 'all', '--handlers', HANDLERS], env),
      processOf(['control-plane'], env),
      // Refused before its inspector relay opens: the refusal is all it prints.
      processOf(['control-plane', '--inspect', '--inspect-port', '0'], env),
    ]);
    for (const [role, r] of [
      ['worker', worker],
      ['control-plane', plane],
      ['control-plane', inspecting],
    ] as const) {
      expect(r.code, `${role}\n${r.stdout}\n${r.stderr}`).toBe(2);
      expect(r.stdout, role).toBe('');
      expect(r.stderr.split('\n'), role).toEqual([
        `opstate ${role}: NATS_URL is not set: a ${role} on the in-process transport never exchanges work with another process; set NATS_URL=nats://host:4222, or pass --in-process if this process alone is meant to see its work [CONFIG]`,
      ]);
    }
  });

  it('--in-process starts one and says so; beside a NATS_URL it is a contradiction', async () => {
    const started = await processOf(
      ['worker', '--in-process', '--kinds', 'transfer', '--handlers', HANDLERS],
      { DATABASE_URL: db.url, NATS_URL: '' },
    );
    expect(started.code, `${started.stdout}\n${started.stderr}`).toBe(0);
    expect(started.stdout).toMatch(/^worker \S+ started for transfer \(postgres, in-process\)$/m);
    expect(started.stderr.split('\n')[0]).toBe(
      `opstate: database ${redactUrl(db.url)}; transport in-process (this process only)`,
    );
    const both = await opstate(['control-plane', '--in-process'], {
      DATABASE_URL: db.url,
      NATS_URL,
    });
    expect(both.code).toBe(2);
    expect(both.stderr).toBe(
      `opstate control-plane: --in-process runs on the in-process transport, but NATS_URL is set (${NATS_URL}); unset NATS_URL or drop --in-process [CONFIG]`,
    );
  });
});

describe('a port already in use', () => {
  let held: Server;
  let port: number;
  beforeAll(async () => {
    held = createServer();
    await new Promise<void>((resolve) => held.listen(0, '0.0.0.0', () => resolve()));
    port = (held.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => held.close(() => resolve()));
  });

  it('is one line naming the port, what wanted it and the flag, exit 1, for each of the three', async () => {
    const env = { DATABASE_URL: db.url, NATS_URL, OPSTATE_PREFIX: `settings_${port}` };
    const [dashboard, relay, metrics] = await Promise.all([
      // On the in-process transport: the dashboard would otherwise create this prefix's stream.
      processOf(['dashboard', '--port', String(port)], { ...env, NATS_URL: '' }),
      processOf(['control-plane', '--inspect', '--inspect-port', String(port)], env),
      processOf(
        ['worker', '--kinds', 'all', '--handlers', HANDLERS, '--metrics-port', String(port)],
        env,
      ),
    ]);
    const cases = [
      [dashboard, 'dashboard', 'the dashboard', 'pass --port with another port (0: any free one)'],
      [
        relay,
        'control-plane',
        'the Stately inspector relay',
        'pass --inspect-port with another port, or --inspect-url to use a relay already running',
      ],
      [
        metrics,
        'worker',
        "the worker's metrics (/metrics, /healthz, /readyz)",
        'pass --metrics-port (or OPSTATE_METRICS_PORT) with another port, 0 for any free one',
      ],
    ] as const;
    for (const [r, command, wanted, fix] of cases) {
      const line = `opstate ${command}: port ${port} is already in use, so ${wanted} cannot listen there; ${fix}, or stop what holds it`;
      expect(r.code, `${command}\n${r.stderr}`).toBe(1);
      expect(r.stderr.split('\n'), command).toContain(line);
      expect(r.stderr, command).not.toMatch(STACK);
      expect(r.stderr, command).not.toContain('EADDRINUSE');
    }
  });
});
