import { basename, join } from 'node:path';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { writePackage } from './packageFormat.ts';
import { fieldOf, inputsOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy } from './storage.ts';

/**
 * Packaging (`raw_data_package`): the input raw data file copies, each checked against its record,
 * become one package file `<root>/raw_data_package/<id>.tar` (a tar with a sha256 manifest) at the
 * operation's location. One durable step, `pack`.
 *
 * @example
 * ```ts
 * runtime.startWorker({ kinds: [OperationKind.RAW_DATA_PACKAGE],
 *   handlers: { [OperationKind.RAW_DATA_PACKAGE]: packagingHandler(env) } });
 * ```
 */
export function packagingHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const packageId = fieldOf(view, 'rawDataPackageId');
    const locationId = fieldOf(view, 'locationId');
    const files = inputsOf(view, ArtifactType.RAW_DATA_FILE);
    const stored = await ctx.step('pack', async () => {
      const members = [];
      for (const file of files) {
        members.push({ name: basename(String(file.path)), data: await readCopy(file) });
      }
      const path = join(env.storageRootOf(locationId), 'raw_data_package', `${packageId}.tar`);
      return putOnce(path, writePackage(members));
    });
    return { outputs: [outputCopy(ArtifactType.RAW_DATA_PACKAGE, packageId, locationId, stored)] };
  };
}
