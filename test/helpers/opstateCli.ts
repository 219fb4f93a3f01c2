import { fileURLToPath } from 'node:url';

/** The repository's root: the working directory of every CLI process a test starts. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Node arguments that run `opstate <args>` from the TypeScript sources (tsx, a dev dependency),
 * so that a worker loading a TypeScript fixture module shares one copy of every class with it.
 * The built package (`dist/`, `bin/opstate.js`) is proved by the pack test instead. Spawn with
 * `cwd: REPO_ROOT`.
 *
 * @example
 * ```ts
 * spawn(process.execPath, opstateArgs(['status', '--json']), { cwd: REPO_ROOT });
 * ```
 */
export function opstateArgs(args: readonly string[]): string[] {
  return ['--import', 'tsx', fileURLToPath(new URL('../../cli/run.ts', import.meta.url)), ...args];
}
