import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);

/** The package.json of `name`: exported as such, else the one above its entry point. */
function packageJsonOf(name: string): string {
  try {
    return require.resolve(`${name}/package.json`);
  } catch {
    // its exports do not publish package.json (DBOS's): walk up from its entry point
  }
  let dir = dirname(fileURLToPath(import.meta.resolve(name)));
  while (dir !== dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file) && JSON.parse(readFileSync(file, 'utf8')).name === name) return file;
    dir = dirname(dir);
  }
  throw new Error(`no package.json of ${name} above its entry point`);
}

/**
 * The installed version of a package, for a figure's note.
 *
 * @example
 * ```ts
 * packageVersion('@dbos-inc/dbos-sdk'); // '5.3.0'
 * ```
 */
export function packageVersion(name: string): string {
  return (JSON.parse(readFileSync(packageJsonOf(name), 'utf8')) as { version: string }).version;
}
