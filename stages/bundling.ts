import { join } from 'node:path';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { writePackage } from './packageFormat.ts';
import { fieldOf, inputsOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy } from './storage.ts';

/**
 * Bundling (`data_transfer_package`): the input raw data package copies become one data transfer
 * package `<root>/data_transfer_package/<id>.tar`, whose members are the package files
 * (`<package id>.tar`) under a sha256 manifest. One durable step, `bundle`.
 *
 * @example
 * ```ts
 * handlers[OperationKind.DATA_TRANSFER_PACKAGE] = bundlingHandler(env);
 * ```
 */
export function bundlingHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const bundleId = fieldOf(view, 'dataTransferPackageId');
    const locationId = fieldOf(view, 'locationId');
    const packages = inputsOf(view, ArtifactType.RAW_DATA_PACKAGE);
    const stored = await ctx.step('bundle', async () => {
      const members = [];
      for (const pkg of packages) {
        members.push({ name: `${pkg.artifactId}.tar`, data: await readCopy(pkg) });
      }
      const path = join(env.storageRootOf(locationId), 'data_transfer_package', `${bundleId}.tar`);
      return putOnce(path, writePackage(members));
    });
    return {
      outputs: [outputCopy(ArtifactType.DATA_TRANSFER_PACKAGE, bundleId, locationId, stored)],
    };
  };
}
