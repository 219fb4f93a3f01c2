import { OperationKind } from '../../machines/OperationKind.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import type { OutputCopy } from '../../persistence/OutputCopy.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { archiveStandIn } from '../../stages/archiveStandIn.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';

/**
 * For repository tests that complete a long-term archive by hand (no worker): archives a stand-in
 * package of the operation's raw data package through opstate's archive protocol
 * (`archiveStandIn`: put-if-absent, read back, verify, each transition appended to the archive
 * record under `attempt`, which must hold the operation IN_PROGRESS) and returns the archive copy
 * to complete with, carrying the verified checksum. Its steps run directly, as a handler's would
 * on their first run.
 *
 * @example
 * ```ts
 * await store.complete(id, 1, [await verifiedArchiveOutput(db, id)]);
 * ```
 */
export async function verifiedArchiveOutput(
  database: Database,
  operationId: string,
  attempt = 1,
): Promise<OutputCopy> {
  const ctx = {
    operation: { id: operationId, kind: OperationKind.LONG_TERM_ARCHIVE, attempt, retryCount: 0 },
    step: <T>(_name: string, fn: () => Promise<T>) => fn(),
    signal: new AbortController().signal,
    inspect: () => inspectOperation(database, operationId),
    withDatabase: <T>(_what: string, run: (db: Database) => Promise<T>) => run(database),
  } as unknown as HandlerContext;
  const { outputs } = await archiveStandIn(ctx);
  return outputs[0] as OutputCopy;
}
