import { join } from 'node:path';
import type { OperationHandler } from '../actors/Worker.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import { readPackage } from './packageFormat.ts';
import { fieldOf, inputOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy, type StoredObject } from './storage.ts';

const MEMBER = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.tar$/;

/**
 * Unpack: the data transfer package's copy at the location is read and checked against its
 * manifest, and each member package is written to `raw_data_package/<id>.tar` there: one raw data
 * package copy per member (fan-out). One durable step, `unpack`.
 *
 * @example
 * ```ts
 * handlers[OperationKind.UNPACK] = unpackHandler(env);
 * ```
 */
export function unpackHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const locationId = fieldOf(view, 'locationId');
    const bundle = inputOf(view, ArtifactType.DATA_TRANSFER_PACKAGE, locationId);
    const unpacked = await ctx.step('unpack', async () => {
      const { members } = readPackage(await readCopy(bundle));
      const written: (StoredObject & { packageId: string })[] = [];
      for (const m of members) {
        const packageId = MEMBER.exec(m.name)?.[1];
        if (packageId === undefined) {
          throw new OpstateError(
            OpstateErrorCode.BAD_INPUT,
            `member '${m.name}' of data transfer package ${fieldOf(view, 'dataTransferPackageId')} is not '<raw data package id>.tar'`,
          );
        }
        const path = join(env.storageRootOf(locationId), 'raw_data_package', m.name);
        written.push({ packageId, ...(await putOnce(path, m.data)) });
      }
      return written;
    });
    return {
      outputs: unpacked.map((p) =>
        outputCopy(ArtifactType.RAW_DATA_PACKAGE, p.packageId, locationId, p),
      ),
    };
  };
}
