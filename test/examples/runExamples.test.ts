import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATS_URL } from '../actors/harness.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';

const run = promisify(execFile);

/**
 * Each numbered example runs as its first comment says, against the real Postgres and NATS: a
 * database of its own and a NATS prefix of its own per run, so nothing is shared with another
 * test or a leftover.
 */
describe('the numbered examples run as their comments say', () => {
  let db: TestDatabase;
  let storage: string;
  const children: ChildProcess[] = [];
  const env = () => ({
    ...process.env,
    DATABASE_URL: db.url,
    NATS_URL,
    OPSTATE_PREFIX: `ex${Math.random().toString(36).slice(2, 10)}`,
    OPSTATE_EXAMPLE_STORAGE: storage,
    OPSTATE_LOG_LEVEL: 'warn',
  });

  /** A long-running example process, with what it printed so far. */
  function start(args: readonly string[], processEnv: NodeJS.ProcessEnv) {
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env: processEnv });
    children.push(child);
    const out = { text: '' };
    child.stdout?.on('data', (d: Buffer) => {
      out.text += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      out.text += d.toString();
    });
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    return { child, out, exited };
  }

  async function stop(p: ReturnType<typeof start>): Promise<number | null> {
    p.child.kill('SIGTERM');
    return p.exited;
  }

  /** Starts a long-running example process and waits for its ready line. */
  async function startReady(
    args: readonly string[],
    processEnv: NodeJS.ProcessEnv,
    ready: RegExp,
    what: string,
  ): Promise<ReturnType<typeof start>> {
    const p = start(args, processEnv);
    await waitFor(
      () => ready.test(p.out.text),
      what,
      60_000,
      50,
      () => p.out.text,
    );
    return p;
  }

  const EXAMPLE_02 = ['--import', 'tsx', 'examples/02_control_plane_and_worker.ts'];

  /** Example 02's submitter: one transfer, waited for; what it printed. */
  async function submitTransfer(processEnv: NodeJS.ProcessEnv): Promise<string> {
    const { stdout } = await run(process.execPath, [...EXAMPLE_02, 'submit'], {
      cwd: REPO_ROOT,
      env: processEnv,
      timeout: 120_000,
    });
    return stdout;
  }

  beforeAll(async () => {
    db = await createTestDatabase('opstate_examples');
    storage = await mkdtemp(join(tmpdir(), 'opstate-examples-'));
  });

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await dropTestDatabase(db);
    await rm(storage, { recursive: true, force: true });
  });

  it('01: one process archives a package through a journal step, and again on a second run', async () => {
    const processEnv = env();
    for (const round of [1, 2]) {
      const { stdout } = await run(
        process.execPath,
        ['--import', 'tsx', 'examples/01_embedded_pipeline.ts'],
        { cwd: REPO_ROOT, env: processEnv, timeout: 120_000 },
      );
      expect(stdout, `round ${round}`).toContain('SCHEDULED → IN_PROGRESS  START by worker-');
      expect(stdout, `round ${round}`).toMatch(
        /long_term_archive \S+: COMPLETED sha256:[0-9a-f]{64}/,
      );
    }
  });

  it('02: a control plane, a worker and a submitter, each a process, move a transfer to COMPLETED', async () => {
    const processEnv = env();
    const plane = await startReady(
      [...EXAMPLE_02, 'control-plane'],
      processEnv,
      /running; Ctrl-C stops it/,
      'the control plane',
    );
    const worker = await startReady(
      [...EXAMPLE_02, 'worker'],
      processEnv,
      /serving transfer/,
      'the worker',
    );
    const stdout = await submitTransfer(processEnv);
    expect(stdout).toMatch(/IN_PROGRESS → COMPLETED {2}COMPLETE by worker-/);
    expect(stdout).toMatch(/: COMPLETED/);
    expect(await stop(worker)).toBe(0);
    expect(await stop(plane)).toBe(0);
  });

  it('03: the handlers module, compiled as its comment says, serves example 02 under `opstate worker`', async () => {
    const processEnv = env();
    await run(
      process.execPath,
      [
        join(REPO_ROOT, 'node_modules/typescript/bin/tsc'),
        ...['--outDir', 'examples/dist', '--rootDir', 'examples', '--module', 'nodenext'],
        ...['--target', 'es2022', '--skipLibCheck', 'examples/03_handlers_module.ts'],
      ],
      { cwd: REPO_ROOT, timeout: 120_000 },
    );
    const plane = await startReady(
      [...EXAMPLE_02, 'control-plane'],
      processEnv,
      /running; Ctrl-C stops it/,
      'the control plane',
    );
    const handlers = 'examples/dist/03_handlers_module.js';
    const worker = await startReady(
      opstateArgs(['worker', '--kinds', 'transfer', '--handlers', handlers]),
      processEnv,
      /worker \S+ started/,
      'opstate worker',
    );
    const stdout = await submitTransfer(processEnv);
    expect(stdout).toMatch(/IN_PROGRESS → COMPLETED {2}COMPLETE by /);
    expect(stdout).toMatch(/: COMPLETED/);
    expect(await stop(worker)).toBe(0);
    expect(await stop(plane)).toBe(0);
  });

  it('04: a service embeds the dashboard, whose list of operations shows what it submitted', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', 'examples/04_dashboard_embedded.ts'],
      { cwd: REPO_ROOT, env: env(), timeout: 120_000 },
    );
    const url = /dashboard at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1];
    const id = /submitted (\S+)/.exec(stdout)?.[1];
    expect(url, stdout).toBeDefined();
    expect(id, stdout).toMatch(/^[0-9a-f-]{36}$/);
    expect(stdout).toContain(`GET /operations: 200, lists ${id}: true`);
    // The operation it listed is the one submitted, in the database the example ran on.
    const { stdout: inspected } = await run(
      process.execPath,
      opstateArgs(['inspect', String(id), '--json']),
      {
        cwd: REPO_ROOT,
        env: env(),
        timeout: 60_000,
      },
    );
    const view = JSON.parse(inspected) as {
      kind: string;
      transitions: { event: string; by: string }[];
    };
    expect(view.kind).toBe('long_term_archive');
    expect(view.transitions[0]).toMatchObject({ event: 'CREATE', by: 'example-dashboard' });
    // Closed: nothing answers on its port any more.
    await expect(fetch(`${url}/operations`)).rejects.toThrow();
  });
});
