import { join } from 'node:path';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { fieldOf, inputOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy } from './storage.ts';

/**
 * Transfer: the data transfer package's copy at the source location, checked against its record,
 * is copied (create-if-absent) to the destination's `data_transfer_package/<id>.tar`. One durable
 * step, `copy`. The source copy stays where it is.
 *
 * @example
 * ```ts
 * handlers[OperationKind.TRANSFER] = transferHandler(env);
 * ```
 */
export function transferHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const bundleId = fieldOf(view, 'dataTransferPackageId');
    const from = fieldOf(view, 'sourceLocationId');
    const to = fieldOf(view, 'destinationLocationId');
    const source = inputOf(view, ArtifactType.DATA_TRANSFER_PACKAGE, from);
    const stored = await ctx.step('copy', async () => {
      const data = await readCopy(source);
      return putOnce(join(env.storageRootOf(to), 'data_transfer_package', `${bundleId}.tar`), data);
    });
    return { outputs: [outputCopy(ArtifactType.DATA_TRANSFER_PACKAGE, bundleId, to, stored)] };
  };
}
