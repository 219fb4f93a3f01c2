import { execFile } from 'node:child_process';
import { lstat } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import type { SyscallCount } from './SyscallCount.ts';

/** Whether a path is tracked by git, as of the repository state now. */
export type GitTracking =
  | { readonly tracked: false; readonly workTree: null }
  | { readonly tracked: boolean; readonly workTree: string }
  | { readonly tracked: 'unknown'; readonly workTree: string; readonly why: string };

/** Walks up from a folder to the nearest one holding `.git` (a folder or a worktree's file). */
async function workTreeOf(start: string, count?: SyscallCount): Promise<string | null> {
  let dir = start;
  for (;;) {
    try {
      count?.add('lstat');
      await lstat(join(dir, '.git'));
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return dir; // cannot tell: assume one
    }
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

/**
 * Asks git, at this moment, whether `path` is tracked in the work tree that encloses it: the
 * nearest folder above it holding `.git`, then `git ls-files --error-unmatch` there (exit 0:
 * tracked; 1: not). Outside any work tree nothing is spawned. When git cannot answer (not
 * installed, a broken repository) the answer is `unknown` with the reason, and the caller keeps
 * the file: a missed deletion is preferred to a doubtful one.
 *
 * @example
 * ```ts
 * const git = await gitTracking('/data/buffer/pkg/scan_0001.fits');
 * if (git.tracked !== false) keep(git);
 * ```
 */
export async function gitTracking(path: string, count?: SyscallCount): Promise<GitTracking> {
  const workTree = await workTreeOf(dirname(path), count);
  if (workTree === null) return { tracked: false, workTree: null };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('GIT_') && v !== undefined) env[k] = v;
  }
  count?.add('spawn');
  return new Promise((resolve) => {
    execFile(
      'git',
      [
        '-c',
        `safe.directory=${workTree}`,
        '-C',
        workTree,
        'ls-files',
        '--error-unmatch',
        '--',
        relative(workTree, path),
      ],
      { env, timeout: 30_000 },
      (err, _stdout, stderr) => {
        if (err === null) return resolve({ tracked: true, workTree });
        const e = err as Error & { code?: unknown };
        if (e.code === 'ENOENT') {
          return resolve({
            tracked: 'unknown',
            workTree,
            why: `${workTree} holds .git but git is not installed (install git)`,
          });
        }
        if (e.code === 1 && /did not match any file/.test(String(stderr))) {
          return resolve({ tracked: false, workTree });
        }
        resolve({
          tracked: 'unknown',
          workTree,
          why: `git could not answer in ${workTree}: ${String(stderr).trim() || e.message}`,
        });
      },
    );
  });
}
