import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * Whether the installed postgres.js carries opstate's guard against its `nextWrite` crash (a
 * write scheduled after the socket closed throws an uncatchable TypeError and kills the process
 * when Postgres restarts; upstream porsager/postgres#1066, #1154, #1208). `npm install` applies
 * the guard with patch-package (`patches/postgres+3.4.9.patch`); drop both once upstream ships a
 * fix. Returns a sentence for the log when the guard is missing, else undefined.
 *
 * @example
 * ```ts
 * const problem = missingDriverGuard(); if (problem) logger.log('WARNING', problem);
 * ```
 */
export function missingDriverGuard(): string | undefined {
  try {
    const entry = createRequire(import.meta.url).resolve('postgres');
    const root = join(dirname(entry), '..', '..');
    const source = readFileSync(join(root, 'src', 'connection.js'), 'utf8');
    if (source.includes('opstate patch')) return undefined;
    return "postgres.js is installed without opstate's nextWrite guard (patches/postgres+3.4.9.patch, applied by `npm install` through patch-package): a Postgres restart can crash this process";
  } catch {
    return undefined; // a bundled or relocated driver: nothing to inspect
  }
}
