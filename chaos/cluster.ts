import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RuntimeTiming } from '../runtime/RuntimeTiming.ts';
import { BUILT_CLI, REPO_ROOT } from './builtPackage.ts';

/** The reference stage handlers as built, the module docker-compose.yml's workers load. */
export const STAGE_HANDLERS = fileURLToPath(new URL('../dist/stages/handlers.js', import.meta.url));

/** One `opstate` process the run started, with the last lines it printed. */
export interface OpstateProcess {
  readonly name: string;
  readonly role: 'worker' | 'control-plane' | 'command';
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  /** The last lines it printed (stdout and stderr), at most 200. */
  readonly output: string[];
  frozen: boolean;
}

export interface ClusterSettings {
  readonly databaseUrl: string;
  readonly natsUrl: string;
  readonly prefix: string;
  readonly timing: Partial<RuntimeTiming>;
  /** Extra environment for every process (e.g. `OPSTATE_LOG_LEVEL`). */
  readonly env?: Record<string, string>;
  readonly deleterLeaseMs: number;
  readonly deleterIntervalMs: number;
  readonly workerConcurrency: number;
}

/**
 * The `opstate` processes of a chaos run, started as a user starts them: `opstate control-plane`
 * and `opstate worker --kinds all --handlers dist/stages/handlers.js --delete-copies`, each a child
 * process of its own running the built package (`ensureBuilt` first) on the run's private servers.
 */
export class Cluster {
  readonly processes: OpstateProcess[] = [];
  #count = 0;
  constructor(readonly settings: ClusterSettings) {}

  get workers(): OpstateProcess[] {
    return this.live('worker');
  }

  get controlPlanes(): OpstateProcess[] {
    return this.live('control-plane');
  }

  private live(role: OpstateProcess['role']): OpstateProcess[] {
    return this.processes.filter(
      (p) => p.role === role && p.proc.exitCode === null && p.proc.signalCode === null,
    );
  }

  /** Starts `opstate <args>`. */
  spawn(role: OpstateProcess['role'], name: string, args: string[]): OpstateProcess {
    const s = this.settings;
    const proc = spawn(process.execPath, [BUILT_CLI, ...args], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        DATABASE_URL: s.databaseUrl,
        NATS_URL: s.natsUrl,
        // The drill's private nats-server takes clients without credentials: said to be meant.
        OPSTATE_NATS_INSECURE: '1',
        OPSTATE_PREFIX: s.prefix,
        OPSTATE_TIMING: JSON.stringify(s.timing),
        ...s.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    const collect = (chunk: Buffer) => {
      output.push(...chunk.toString().split('\n').filter(Boolean));
      if (output.length > 200) output.splice(0, output.length - 200);
    };
    proc.stdout?.on('data', collect);
    proc.stderr?.on('data', collect);
    const exited = new Promise<number | null>((resolve) =>
      proc.on('exit', (code) => resolve(code)),
    );
    const p: OpstateProcess = { name, role, proc, exited, output, frozen: false };
    this.processes.push(p);
    return p;
  }

  /** Runs a one-shot command (`migrate`, `policy set …`) and returns its exit code and output. */
  async command(args: string[]): Promise<{ code: number | null; output: string }> {
    const p = this.spawn('command', `cmd-${args[0]}`, args);
    const code = await p.exited;
    return { code, output: p.output.join('\n') };
  }

  startControlPlane(): OpstateProcess {
    return this.spawn('control-plane', `cp-${++this.#count}`, ['control-plane']);
  }

  startWorker(): OpstateProcess {
    const s = this.settings;
    const name = `w-${++this.#count}`;
    return this.spawn('worker', name, [
      'worker',
      '--kinds',
      'all',
      '--handlers',
      STAGE_HANDLERS,
      '--id',
      name,
      '--concurrency',
      String(s.workerConcurrency),
      '--delete-copies',
      '--deleter-lease-ms',
      String(s.deleterLeaseMs),
      '--deleter-interval-ms',
      String(s.deleterIntervalMs),
    ]);
  }

  /** SIGKILL, and waits for the process to be gone. */
  async kill(p: OpstateProcess): Promise<void> {
    if (p.frozen) p.proc.kill('SIGCONT');
    p.frozen = false;
    p.proc.kill('SIGKILL');
    await p.exited;
  }

  freeze(p: OpstateProcess): void {
    p.proc.kill('SIGSTOP');
    p.frozen = true;
  }

  thaw(p: OpstateProcess): void {
    p.proc.kill('SIGCONT');
    p.frozen = false;
  }

  /** Kills every process still running. */
  async close(): Promise<void> {
    await Promise.all(
      this.processes
        .filter((p) => p.proc.exitCode === null && p.proc.signalCode === null)
        .map((p) => this.kill(p)),
    );
  }
}
