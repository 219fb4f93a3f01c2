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
 * For tests and drills whose long-term-archive operations have no real source on disk: archives
 * the operation's package through opstate's own archive protocol (`runArchiveProtocol` —
 * put-if-absent, read back, verify, each transition appended to the archive record through the
 * worker's database, fenced on the attempt), so the operation can complete under its kind's
 * output contract, which requires the VERIFIED record. The package
 * is a one-member stand-in for the raw data package (its bytes are not what a test is about); the
 * store is `store`, else a local folder per operation under the OS temp folder. Returns the outputs
 * the real stage returns: the package's copy at the archive with the verified checksum.
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
  const at = store ?? archiveStoreAt(join(tmpdir(), 'opstate-test-archives', ctx.operation.id));
  const archived = await runArchiveProtocol(
    ctx,
    {},
    at,
    archiveKeyOf(view.fields, packageId),
    await standInSource(packageId),
  );
  return { outputs: [archivedCopy(packageId, archiveId, archived)] };
}
