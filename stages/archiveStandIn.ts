import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OutputCopy } from '../persistence/publicRecords.ts';
import type { HandlerContext } from '../worker/OperationHandler.ts';
import type { ArchiveStore } from './ArchiveStore.ts';
import { archivedCopy, archiveKeyOf, runArchiveProtocol } from './longTermArchive.ts';
import { archiveStoreAt } from './registerArchiveStore.ts';
import { fieldOf } from './StageEnvironment.ts';
import { standInSource } from './standInSource.ts';

/**
 * The variable naming the folder `archiveStandIn` keeps its stand-in archives in when it is given
 * no store (default: `opstate-test-archives` under the OS temp folder). A test run sets it to a
 * folder of its own and removes that folder when it ends.
 */
export const STAND_IN_ARCHIVE_DIR_ENV = 'OPSTATE_STAND_IN_ARCHIVE_DIR';

/**
 * For tests and drills whose long-term-archive operations have no real source on disk: archives
 * the operation's package through opstate's own archive protocol (`runArchiveProtocol` —
 * put-if-absent, read back, verify, each transition appended to the archive record through the
 * worker's database, fenced on the attempt), so the operation can complete under its kind's
 * output contract, which requires the VERIFIED record. The package is a one-member stand-in for
 * the raw data package (its bytes are not what a test is about); the store is `store`, else a
 * local folder per operation under `OPSTATE_STAND_IN_ARCHIVE_DIR` (default `opstate-test-archives`
 * under the OS temp folder). That folder outlives the process, so that another worker can resume
 * the archive: point the variable at a folder the test run removes when it is done. Returns the
 * outputs the real stage returns: the package's copy at the archive with the verified checksum.
 *
 * @example
 * ```ts
 * handlers[OperationKind.LONG_TERM_ARCHIVE] = (ctx) => archiveStandIn(ctx);
 * ```
 */
export async function archiveStandIn(
  ctx: HandlerContext,
  store?: ArchiveStore,
): Promise<{ outputs: OutputCopy[] }> {
  const view = await ctx.inspect();
  const packageId = fieldOf(view, 'rawDataPackageId');
  const archiveId = fieldOf(view, 'destinationLocationId');
  const folder = process.env[STAND_IN_ARCHIVE_DIR_ENV] ?? join(tmpdir(), 'opstate-test-archives');
  const at = store ?? archiveStoreAt(join(folder, ctx.operation.id));
  const archived = await runArchiveProtocol(
    ctx,
    {},
    at,
    archiveKeyOf(view.fields, packageId),
    await standInSource(packageId),
  );
  return { outputs: [archivedCopy(packageId, archiveId, archived)] };
}
