import { join } from 'node:path';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { MANIFEST_NAME, readPackage, sha256, writePackage } from './packageFormat.ts';
import { fieldOf, inputOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy } from './storage.ts';
import { unpackTar } from './tar.ts';

const MEMBER = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.tar$/;

/**
 * Unpack: the data transfer package's copy at the location is read and checked against its
 * manifest, and each member package is unpacked into the folder `raw_data_package/<id>/` there
 * (its `MANIFEST.json` and its files, each created if absent): one raw data package copy per
 * member (fan-out), whose path is the folder and whose checksum is the package's. A package that
 * does not rebuild to the same bytes from its folder is refused. One durable step, `unpack`.
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
      const written: { packageId: string; path: string; sha256: string; size: number }[] = [];
      for (const m of members) {
        const packageId = MEMBER.exec(m.name)?.[1];
        if (packageId === undefined) {
          throw new OpstateError(
            OpstateErrorCode.BAD_INPUT,
            `member '${m.name}' of data transfer package ${fieldOf(view, 'dataTransferPackageId')} is not '<raw data package id>.tar'`,
          );
        }
        const inner = readPackage(m.data).members;
        if (!writePackage(inner).equals(Buffer.from(m.data))) {
          throw new OpstateError(
            OpstateErrorCode.BAD_INPUT,
            `package ${m.name} is not in the canonical package form; it cannot be unpacked and rebuilt to the same bytes`,
          );
        }
        const [head] = unpackTar(m.data);
        const folder = join(env.storageRootOf(locationId), 'raw_data_package', packageId);
        // A worker fenced mid-step (frozen past its heartbeat timeout) writes nothing more: the
        // buffer copy may already be archived and deleted by the attempt that replaced it.
        ctx.signal.throwIfAborted();
        await putOnce(join(folder, MANIFEST_NAME), head?.data ?? Buffer.alloc(0));
        for (const file of inner) {
          ctx.signal.throwIfAborted();
          await putOnce(join(folder, file.name), file.data);
        }
        written.push({ packageId, path: folder, sha256: sha256(m.data), size: m.data.length });
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
