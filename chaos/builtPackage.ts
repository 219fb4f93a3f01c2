import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root: the working directory of every `opstate` process a tool starts. */
export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The built command line, as `bin/opstate.js` runs it. */
export const BUILT_CLI = join(REPO_ROOT, 'dist', 'cli', 'run.js');

/**
 * The folders and files `npm run build` compiles into `dist/`: tsconfig.build.json's `include`,
 * read from the file (whose comments are whole `//` lines) so that the two never disagree.
 */
function buildInputs(): string[] {
  const text = readFileSync(join(REPO_ROOT, 'tsconfig.build.json'), 'utf8')
    .split('\n')
    .filter((line) => !line.trim().startsWith('//'))
    .join('\n');
  return (JSON.parse(text) as { include: string[] }).include;
}

function newestInput(path: string): number {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let newest = s.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestInput(join(path, entry)));
  return newest;
}

/**
 * Why `dist/` does not hold the sources as they are now (missing, or a source changed since the
 * build, or a build that stopped part-way), or undefined when it does. The build empties `dist/`
 * first, so `dist/index.js` is as old as the build.
 */
export function staleBuild(): string | undefined {
  const stamp = join(REPO_ROOT, 'dist', 'index.js');
  if (!existsSync(stamp) || !existsSync(BUILT_CLI)) return 'dist/ is missing';
  // The build copies these last, after tsc: a build that failed part-way (tsc still writes what it
  // compiled) leaves a fresh dist/index.js without them.
  for (const copied of ['persistence/migrations', 'persistence/vendor']) {
    if (!existsSync(join(REPO_ROOT, 'dist', copied))) return `dist/${copied} is missing`;
  }
  const built = statSync(stamp).mtimeMs;
  for (const input of buildInputs()) {
    const path = join(REPO_ROOT, input);
    if (existsSync(path) && newestInput(path) > built) return `${input} changed since the build`;
  }
  return undefined;
}

/**
 * Makes sure `dist/` holds the current sources: builds when it is missing or older than a source
 * (`npm run build`, a few seconds), and throws when the build fails. Processes that the chaos run
 * and the drills start run the built package, as users run it.
 */
export function ensureBuilt(log: (line: string) => void = () => undefined): void {
  const why = staleBuild();
  if (why === undefined) return;
  log(`building the package (${why})`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['run', 'build'], { cwd: REPO_ROOT, encoding: 'utf8' });
  if (r.status !== 0) {
    throw new Error(`npm run build failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
}
