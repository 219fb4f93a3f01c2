import { join } from 'node:path';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { HandlerContext, OperationHandler } from '../worker/OperationHandler.ts';
import { openArchiveObject, readArchiveObject } from './archiveObject.ts';
import { readPackage, sha256 } from './packageFormat.ts';
import { archiveOperationOf, loadRecordedArchive } from './recordedArchive.ts';
import {
  archiveStoreOf,
  fieldOf,
  inputOf,
  outputCopy,
  type StageEnvironment,
} from './StageEnvironment.ts';
import { matchingRecord, putOnce, readCopy } from './storage.ts';

/**
 * The package an archive copy holds, read through its location's archive store
 * (`archiveStoreOf`: the local folder store, `sftp:`, or any registered one) at the key its archive
 * record names. The object must still be the one first written (the recorded version and
 * whole-object digest); it is decrypted with the environment's key when it was sealed, and must
 * have the package digest and size the copy records. A copy that no archive operation produced
 * (registered by hand) has no recorded key: it is read at its path, which must be a local file.
 */
async function readArchivedPackage(
  ctx: HandlerContext,
  env: StageEnvironment,
  copy: PhysicalCopyRecord,
): Promise<Buffer> {
  const recorded = await ctx.withDatabase('reading the archive record of the input of', (db) =>
    archiveOperationOf(db as Database, copy.id).then((operationId) =>
      operationId === undefined ? undefined : loadRecordedArchive(db as Database, operationId),
    ),
  );
  if (recorded === undefined) return readCopy(copy, env.cipher);
  const { expected } = recorded;
  const read = await readArchiveObject(await archiveStoreOf(env, copy.locationId), expected.key);
  const whole = sha256(read.stored);
  const problems = [
    ...(expected.objectVersion !== null && read.objectVersion !== expected.objectVersion
      ? [`version ${read.objectVersion}, first written as ${expected.objectVersion}`]
      : []),
    ...(whole !== expected.objectSha256
      ? [`whole-object sha256 ${whole}, recorded ${expected.objectSha256}`]
      : []),
  ];
  if (problems.length > 0) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${read.location} is not the object archive ${recorded.operationId} wrote (${problems.join('; ')}); nothing was staged: check it with \`opstate archive verify ${recorded.operationId}\``,
      { details: { copyId: copy.id, archiveOperationId: recorded.operationId, problems } },
    );
  }
  return matchingRecord(copy, openArchiveObject(read, env.cipher), read.location);
}

/**
 * Staging: the package's archive copy is read through its archive location's store (decrypted
 * with the environment's key when it was sealed), checked against its archive record, its copy
 * record and its manifest, and its files are extracted (create-if-absent) into
 * `<processing root>/<package id>/`. The copy it reports is that folder, with the archived
 * package's digest and size. One durable step, `extract`.
 *
 * @example
 * ```ts
 * handlers[OperationKind.STAGING] = stagingHandler(env);
 * ```
 */
export function stagingHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const packageId = fieldOf(view, 'rawDataPackageId');
    const to = fieldOf(view, 'destinationLocationId');
    const archived = inputOf(
      view,
      ArtifactType.RAW_DATA_PACKAGE,
      fieldOf(view, 'sourceLocationId'),
    );
    const staged = await ctx.step('extract', async () => {
      const data = await readArchivedPackage(ctx, env, archived);
      const { members } = readPackage(data);
      const folder = join(env.storageRootOf(to), packageId);
      for (const m of members) {
        ctx.signal.throwIfAborted(); // a worker fenced mid-step writes nothing more
        await putOnce(join(folder, m.name), m.data);
      }
      return { path: folder, files: members.length, sha256: sha256(data), size: data.length };
    });
    return { outputs: [outputCopy(ArtifactType.RAW_DATA_PACKAGE, packageId, to, staged)] };
  };
}
