import { execFile } from 'node:child_process';
import { main } from '../../cli/main.ts';
import { opstateArgs, REPO_ROOT } from './opstateCli.ts';

/** What one `opstate` command left: its exit code and what it printed, trimmed. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `opstate <args>` spawned as a user runs it, with `env` over this process's environment.
 *
 * @example
 * ```ts
 * const r = await spawnCli(['status', '--json'], { DATABASE_URL: url });
 * ```
 */
export function spawnCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      opstateArgs(args),
      { cwd: REPO_ROOT, env: { ...process.env, ...env } },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : Number((err as { code?: number }).code ?? 1);
        resolve({ code, stdout: stdout.trim(), stderr: stderr.trim() });
      },
    );
  });
}

/**
 * `opstate <args>` in this process (the same `main` the spawned CLI runs), with `env` set for the
 * call and restored after it: the cheap way to run the follow-up commands of a flow proved by
 * processes.
 *
 * @example
 * ```ts
 * const r = await runCliInProcess(['inspect', id], { DATABASE_URL: url });
 * ```
 */
export async function runCliInProcess(
  args: string[],
  env: Record<string, string>,
): Promise<CliResult> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  const out: string[] = [];
  const err: string[] = [];
  try {
    const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, stdout: out.join('\n').trim(), stderr: err.join('\n').trim() };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
