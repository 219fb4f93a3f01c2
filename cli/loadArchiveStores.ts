import { OpstateError } from '../machines/OpstateError.ts';
import type { ArchiveStoreFactory } from '../stages/ArchiveStore.ts';
import { registerArchiveStore } from '../stages/registerArchiveStore.ts';
import { UsageError } from './Command.ts';
import { importModule } from './importModule.ts';

/** The variable naming store modules for `opstate archive verify` and `restore`, comma-separated. */
export const ARCHIVE_STORE_MODULES_ENV = 'OPSTATE_ARCHIVE_STORE_MODULES';

/**
 * The store modules named by `--store-module` (each use) and by `OPSTATE_ARCHIVE_STORE_MODULES`
 * (comma-separated), the option's first.
 *
 * @example
 * ```ts
 * const modules = storeModulesOf(['./s3Store.js'], process.env);
 * ```
 */
export function storeModulesOf(
  fromOption: readonly string[] | undefined,
  env: NodeJS.ProcessEnv,
): string[] {
  const fromEnv = (env[ARCHIVE_STORE_MODULES_ENV] ?? '')
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  return [...new Set([...(fromOption ?? []), ...fromEnv])];
}

/**
 * Loads an archive store module (`opstate archive verify|restore --store-module <module>`) and
 * registers the stores it exports, so that the CLI reaches archives kept on a store registered
 * outside it (the handlers module of `opstate worker` registers its stores in the worker's own
 * process). The module is JavaScript (`.js`/`.mjs`) exporting `archiveStores` (or a default
 * export): an object mapping each storage-root scheme to its store factory, as
 * `registerArchiveStore(scheme, factory)` takes them. A module that is missing, not JavaScript,
 * exports no such object, or names an invalid scheme or a scheme registered to another store is a
 * usage error naming the module. Returns the schemes it registered.
 *
 * @example
 * ```ts
 * // s3Store.mjs: export const archiveStores = { s3: (location) => new MyS3Store(location) };
 * await loadArchiveStores('./s3Store.mjs'); // ['s3']
 * ```
 */
export async function loadArchiveStores(path: string): Promise<string[]> {
  const mod = await importModule<{ default?: unknown; archiveStores?: unknown }>(
    path,
    'archive store module',
  );
  const exported = mod.archiveStores ?? mod.default;
  const entries =
    typeof exported === 'object' && exported !== null ? Object.entries(exported) : undefined;
  if (entries === undefined || entries.length === 0) {
    throw new UsageError(
      `${path} must export 'archiveStores' (or a default export): an object mapping each storage-root scheme to its store factory, e.g. { s3: (location) => new MyS3Store(location) }`,
    );
  }
  for (const [scheme, factory] of entries) {
    if (typeof factory !== 'function') {
      throw new UsageError(
        `${path}: archiveStores.${scheme} must be a store factory, (location, { clock }) => store; got ${typeof factory}`,
      );
    }
    try {
      registerArchiveStore(scheme, factory as ArchiveStoreFactory);
    } catch (err) {
      if (err instanceof OpstateError) throw new UsageError(`${path}: ${err.message}`);
      throw err;
    }
  }
  return entries.map(([scheme]) => scheme);
}
