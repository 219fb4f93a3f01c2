import { OperationKind } from '../machines/OperationKind.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { bundlingHandler } from './bundling.ts';
import { longTermArchiveHandler } from './longTermArchive.ts';
import { packagingHandler } from './packaging.ts';
import { archiveStoreOf, type StageEnvironment } from './StageEnvironment.ts';
import { stagingHandler } from './staging.ts';
import { transferHandler } from './transfer.ts';
import { unpackHandler } from './unpack.ts';

/**
 * The reference handler of every kind, working on local folders (each location's storage root);
 * the long-term archive is opstate's archive protocol around each archive location's store
 * (`env.archiveStoreOf`, else the store registered for its storage root's scheme).
 * The table is exhaustive: a new kind without a handler fails to compile.
 *
 * @example
 * ```ts
 * runtime.startWorker({ kinds: OPERATION_KINDS,
 *   handlers: createStageHandlers({ storageRootOf: (id) => roots.get(id) as string }) });
 * ```
 */
export function createStageHandlers(
  env: StageEnvironment,
): Readonly<Record<OperationKind, OperationHandler>> {
  return {
    [OperationKind.RAW_DATA_PACKAGE]: packagingHandler(env),
    [OperationKind.DATA_TRANSFER_PACKAGE]: bundlingHandler(env),
    [OperationKind.TRANSFER]: transferHandler(env),
    [OperationKind.UNPACK]: unpackHandler(env),
    [OperationKind.LONG_TERM_ARCHIVE]: longTermArchiveHandler({
      ...env,
      archiveStoreOf: (id) => archiveStoreOf(env, id),
    }),
    [OperationKind.STAGING]: stagingHandler(env),
  };
}
