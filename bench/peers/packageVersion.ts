import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The installed version of a package, read from the package.json above its entry point (the
 * packages' exports do not all publish their package.json), for the figure's note.
 *
 * @example
 * ```ts
 * packageVersion('@dbos-inc/dbos-sdk'); // '5.3.0'
 * ```
 */
export function packageVersion(name: string): string {
  let dir = dirname(fileURLToPath(import.meta.resolve(name)));
  while (dir !== dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (json.name === name && json.version !== undefined) return json.version;
    }
    dir = dirname(dir);
  }
  throw new Error(`no package.json of ${name} above its entry point`);
}
