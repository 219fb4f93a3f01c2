import { type Clock, systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { ArchiveStore, ArchiveStoreFactory } from './ArchiveStore.ts';
import { localArchiveStore } from './LocalArchiveStore.ts';
import { sftpArchiveStore } from './SftpArchiveStore.ts';

/** A scheme: a letter, then letters, digits, `+`, `.` or `-`; two characters at least. */
const SCHEME = /^[a-z][a-z0-9+.-]+$/;
/** The scheme a storage root starts with (`s3:`, `file:`), if any. */
const SCHEME_OF = /^([a-z][a-z0-9+.-]+):/;

const factories = new Map<string, ArchiveStoreFactory>([
  ['file', localArchiveStore],
  ['sftp', sftpArchiveStore],
]);

/**
 * Registers the archive store of a `storageRoot` scheme: a long-term-archive location whose
 * storage root starts with `<scheme>:` is stored through the store `factory` makes of it — by the
 * archive stage, `opstate archive verify` and `opstate archive restore` alike. A storage root with
 * no scheme (a path) or `file:` is a local folder. A scheme that is not a valid name, `file`, or
 * one already registered to another factory is a `CONFIG` error. Returns a function that removes
 * the registration (for tests).
 *
 * @example
 * ```ts
 * registerArchiveStore('s3', (location) => new MyS3Store(location)); // storageRoot 's3:bucket/prefix'
 * ```
 */
export function registerArchiveStore(scheme: string, factory: ArchiveStoreFactory): () => void {
  if (!SCHEME.test(scheme) || scheme === 'file') {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `archive store scheme '${scheme}' must be a lowercase letter followed by letters, digits, '+', '.' or '-' (two characters at least), and not 'file' (the local folder store)`,
    );
  }
  const known = factories.get(scheme);
  if (known !== undefined && known !== factory) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `archive store scheme '${scheme}' is already registered to another store; register each scheme once`,
    );
  }
  factories.set(scheme, factory);
  return () => {
    if (factories.get(scheme) === factory) factories.delete(scheme);
  };
}

/**
 * The archive store of a location, from its storage root: the store registered for its scheme,
 * or the local folder store for a path or `file:`. An unregistered scheme is a `CONFIG` error
 * naming the registered ones and the fix.
 *
 * @example
 * ```ts
 * const store = archiveStoreAt(location.storageRoot); // '/lta' → a LocalArchiveStore
 * ```
 */
export function archiveStoreAt(storageRoot: string, clock: Clock = systemClock): ArchiveStore {
  const scheme = SCHEME_OF.exec(storageRoot)?.[1] ?? 'file';
  const factory = factories.get(scheme);
  if (factory === undefined) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `storage root '${storageRoot}' names archive store '${scheme}', which is not registered here (registered: ${[...factories.keys()].join(', ')}); call registerArchiveStore('${scheme}', factory) in the module that starts the worker or the handlers module`,
      { details: { unregisteredScheme: scheme, registered: [...factories.keys()] } },
    );
  }
  return factory(storageRoot, { clock });
}
