/** The `opstate` child processes a bench starts: worker and control-plane processes. */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { opstateArgs } from '../../test/helpers/opstateCli.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An `opstate` child process and what it printed so far. */
export interface Child {
  readonly proc: ChildProcess;
  readonly output: string[];
  readonly exited: Promise<number | null>;
}

/** Starts `opstate <args>` (the built package) with `childEnv` added to this environment. */
export function spawnCli(args: string[], childEnv: Record<string, string>): Child {
  const proc = spawn(process.execPath, opstateArgs(args), {
    cwd: ROOT,
    env: { ...process.env, ...childEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const collect = (chunk: Buffer) => output.push(...chunk.toString().split('\n').filter(Boolean));
  proc.stdout?.on('data', collect);
  proc.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return { proc, output, exited };
}

/** Waits until the child printed a line containing `text`; throws if it exits first. */
export async function waitForOutput(child: Child, text: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!child.output.some((l) => l.includes(text))) {
    if (child.proc.exitCode !== null) {
      throw new Error(`child exited (${child.proc.exitCode}): ${child.output.join('\n')}`);
    }
    if (Date.now() > deadline) throw new Error(`child never printed '${text}'`);
    await sleep(20);
  }
}

/** Signals the child and waits for it to exit, killing it after 10 s. */
export async function stopChild(child: Child, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill(signal);
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 10_000);
  await child.exited;
  clearTimeout(timer);
}

/** A process's resident set and its high-water mark (KiB), from /proc. */
export function rssKb(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1]);
  return { rss: field('VmRSS'), hwm: field('VmHWM') };
}
