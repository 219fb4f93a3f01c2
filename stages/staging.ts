import { join } from 'node:path';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { readPackage, sha256 } from './packageFormat.ts';
import { fieldOf, inputOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy } from './storage.ts';

/**
 * Staging: the package's archive copy is read (decrypted with the environment's key when it was
 * sealed), checked against its record and its manifest, and
 * its files are extracted (create-if-absent) into `<processing root>/<package id>/`. The copy it
 * reports is that folder, with the archived package's digest and size. One durable step,
 * `extract`.
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
      const data = await readCopy(archived, env.cipher);
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
