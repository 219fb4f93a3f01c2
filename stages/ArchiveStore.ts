import type { Clock } from '../machines/Clock.ts';

/**
 * Where long-term archives are kept: a backend that only stores bytes. It writes an object under a
 * key only if the key is free, reads it back, and says what is there; it never replaces, never
 * deletes, and knows nothing of packages, keys, digests or records. Everything that makes an
 * archive safe to delete from — the plan, the comparison with an object already at the key, the
 * read-back, the whole-object and member checks, encryption, the archive record — is opstate's
 * (`defineArchiveStage`, `opstate archive verify`, `opstate archive restore`), the same for every
 * store.
 *
 * A version is the store's own name for one physical object (an S3 version id, an inode and mtime,
 * a generation number): opaque to opstate, which only compares it for equality, so an object
 * replaced behind opstate's back is told apart from the one it wrote. The test suite every store
 * passes is `test/archive/storeContract.ts`.
 *
 * @example
 * ```ts
 * const put = await store.putIfAbsent('raw_data_package/obs-1.tar', chunks);
 * if (!put.created) console.log(`already there as version ${put.version}`);
 * const { version, body } = (await store.read('raw_data_package/obs-1.tar')) ?? fail();
 * ```
 */
export interface ArchiveStore {
  /**
   * Where the object at `key` lives, for people and for the archive copy's record (a file path, a
   * URL): shown, stored, never parsed by opstate.
   */
  describe(key: string): string;
  /**
   * Writes `body` under `key` if, and only if, nothing is there, atomically: the object appears
   * whole or not at all (a writer that dies midway leaves the key free). Returns
   * `{ created: true }` with the new object's version, or `{ created: false }` with the version of
   * the object already at the key, which is left as it was (opstate reads it and decides).
   */
  putIfAbsent(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<{ readonly created: boolean; readonly version: string }>;
  /**
   * The object at `key` as stored, with the version of the object the body comes from; null when
   * there is none. Opstate reads the whole body, then `stat`s the key: another version there means
   * the object changed during the read.
   */
  read(
    key: string,
  ): Promise<{ readonly version: string; readonly body: AsyncIterable<Uint8Array> } | null>;
  /**
   * What is at `key` now: its size in bytes, its version and, where the store keeps one, the
   * sha256 (hex) of its bytes; null when there is none.
   */
  stat(
    key: string,
  ): Promise<{ readonly size: number; readonly version: string; readonly sha256?: string } | null>;
}

/**
 * Makes the store of one archive location from its `storageRoot` (`registerArchiveStore`):
 * `location` is the storage root as registered (scheme included), `clock` the time the store
 * reads, if it reads any.
 */
export type ArchiveStoreFactory = (
  location: string,
  context: { readonly clock: Clock },
) => ArchiveStore;
