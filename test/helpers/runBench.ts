import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** One figure line a bench printed. */
export interface BenchLine {
  readonly name: string;
  readonly value: number;
  readonly baseline?: number;
  readonly ratio?: number;
  readonly [field: string]: unknown;
}

/**
 * Runs `bench/<name>.ts` to its end as `npm run bench -- <name>` would, with `env` added: its
 * exit code, the JSON lines it printed, and its stderr (for a failure message).
 *
 * @example
 * ```ts
 * const { code, lines, stderr } = await runBench('cluster', { OPSTATE_BENCH_CLUSTER_OPS: '100' });
 * ```
 */
export function runBench(
  name: string,
  env: Record<string, string>,
): Promise<{ code: number | null; lines: BenchLine[]; stderr: string }> {
  const file = fileURLToPath(new URL(`../../bench/${name}.ts`, import.meta.url));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('close', (code) => {
      const lines = stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as BenchLine);
      resolve({ code, lines, stderr });
    });
  });
}

/**
 * What a bench left behind: those of `databases` that still exist, and the files in `scratch`
 * (its TMPDIR) other than tsx's compile cache (`tsx-<uid>`). Both empty after a clean run.
 *
 * @example
 * ```ts
 * expect(await leftBehind(adminUrl, databases, scratch)).toEqual({ databases: [], files: [] });
 * ```
 */
export async function leftBehind(
  adminUrl: string,
  databases: readonly string[],
  scratch: string,
): Promise<{ databases: string[]; files: string[] }> {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const left =
      await admin`select datname from pg_database where datname = any(${[...databases]})`;
    return {
      databases: left.map((r) => String(r.datname)),
      files: (await readdir(scratch)).filter((f) => !f.startsWith('tsx-')),
    };
  } finally {
    await admin.end({ timeout: 5 });
  }
}
