import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from './Command.ts';

/**
 * Imports a user's module named on the command line (`--pipeline`, `--store-module`): a path to
 * JavaScript (`.js`/`.mjs`), resolved from the working folder. A file that is not JavaScript, or
 * that does not exist, is a usage error naming it and what it should be (`what`: "pipeline
 * module"); any other failure (the module throwing as it loads) is passed on as it is.
 *
 * @example
 * ```ts
 * const mod = await importModule<{ pipeline?: unknown }>('./pipeline.js', 'pipeline module');
 * ```
 */
export async function importModule<T>(path: string, what: string): Promise<T> {
  try {
    return (await import(pathToFileURL(resolve(path)).href)) as T;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_UNKNOWN_FILE_EXTENSION') {
      throw new UsageError(
        `${path} is not JavaScript; compile it to .js or .mjs and pass that file`,
      );
    }
    if (code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(resolve(path))) {
      throw new UsageError(`${path} does not exist; pass the path of a .js or .mjs ${what}`);
    }
    throw err;
  }
}
