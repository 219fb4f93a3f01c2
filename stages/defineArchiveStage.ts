import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { HandlerContext, OperationHandler } from '../worker/OperationHandler.ts';
import type { ArchiveStore } from './ArchiveStore.ts';
import { archiveCipherFromEnv } from './archiveCipher.ts';
import { longTermArchiveHandler } from './longTermArchive.ts';
import { archiveStoreAt } from './registerArchiveStore.ts';

/** What a long-term-archive stage is given (`defineArchiveStage`). */
export interface ArchiveStageOptions {
  /**
   * Where archives are stored: one store for every archive location, or the store of each
   * location by id. Unset, each location's store is the one registered for the scheme of its
   * `storageRoot` (`registerArchiveStore`; a path is a local folder).
   */
  readonly store?: ArchiveStore | ((locationId: string) => ArchiveStore | Promise<ArchiveStore>);
}

/** The registered archive location `locationId`, read through the worker's database. */
async function storageRootOf(ctx: HandlerContext, locationId: string): Promise<string> {
  const [location] = await ctx.withDatabase('reading the archive location of', (database) =>
    new ArtifactRepository(database as Database).locationsById([locationId]),
  );
  if (location === undefined) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `archive location ${locationId} is not registered; register it with runtime.artifacts.addLocation`,
    );
  }
  return location.storageRoot;
}

/**
 * The long-term-archive stage: the handler of `OperationKind.LONG_TERM_ARCHIVE`, running opstate's
 * archive protocol around the store you give it. A store only stores bytes; the stage plans
 * (reading the source copy — an unpacked package folder or a package file — and recording every
 * member), stores the package at its key only if the key is free (sealed with the key in
 * `OPSTATE_ARCHIVE_KEY_FILE` when it is set), compares an object already there instead of
 * overwriting it (another package there is a CONFLICT for an operator), reads the object back,
 * checks the whole-object digest and every member, and appends each transition to the archive
 * record. The record is written through the worker's own database (`ctx.withDatabase`), so a
 * Postgres restart or failover during an archive is waited out, not failed. The operation
 * completes only with the VERIFIED record (its kind's output contract), and only then may a
 * deleter remove the source. `opstate archive verify` and `opstate archive restore` read through
 * the same store.
 *
 * @example
 * ```ts
 * runtime.startWorker({ kinds: [OperationKind.LONG_TERM_ARCHIVE],
 *   handlers: { [OperationKind.LONG_TERM_ARCHIVE]:
 *     defineArchiveStage({ store: new MyObjectStore(bucket) }) } });
 * ```
 */
export function defineArchiveStage(options: ArchiveStageOptions = {}): OperationHandler {
  const { store } = options;
  const cipher = archiveCipherFromEnv();
  const archiveStoreOf = async (locationId: string, ctx: HandlerContext): Promise<ArchiveStore> => {
    if (typeof store === 'function') return store(locationId);
    if (store !== undefined) return store;
    return archiveStoreAt(await storageRootOf(ctx, locationId));
  };
  return longTermArchiveHandler({ archiveStoreOf, ...(cipher === undefined ? {} : { cipher }) });
}
