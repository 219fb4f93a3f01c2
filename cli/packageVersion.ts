import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The version of the opstate package this module belongs to, read from its `package.json`: the
 * nearest one above this file that is opstate's, so it is the same answer from the sources, from
 * `dist/` and from a consumer's `node_modules/opstate`.
 *
 * @example
 * ```ts
 * packageVersion(); // '0.1.0'
 * ```
 */
export function packageVersion(from: string = import.meta.url): string {
  let dir = dirname(fileURLToPath(from));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'opstate' && typeof pkg.version === 'string') return pkg.version;
    }
    const parent = dirname(dir);
    if (parent === dir) return 'unknown (no package.json of opstate above this module)';
    dir = parent;
  }
}
