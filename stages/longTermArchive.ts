import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OperationHandler } from '../actors/Worker.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import { type Manifest, readPackage, sha256 } from './packageFormat.ts';
import { fieldOf, inputOf, outputCopy, type StageEnvironment } from './StageEnvironment.ts';
import { putOnce, readCopy, type StoredObject } from './storage.ts';

/** What the `plan` step records: the archive key and what must arrive there. */
interface ArchivePlan {
  readonly key: string;
  readonly sha256: string;
  readonly size: number;
  readonly members: Manifest['members'];
}

const KEY = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

function archiveKeyOf(key: string | null | undefined, packageId: string): string {
  const chosen = key ?? `raw_data_package/${packageId}.tar`;
  if (!KEY.test(chosen) || chosen.split('/').some((s) => s === '.' || s === '..')) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `archive key '${chosen}' must be a relative path of letters, digits, '.', '_', '-' and '/', without '.' or '..' segments`,
    );
  }
  return chosen;
}

function mismatch(what: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, what);
}

/**
 * Long-term archive, the archive half of archive-then-delete (DESIGN §7), as three durable steps:
 * - `plan`: read the source package, check it against its manifest, record key, digest, members;
 * - `upload`: create-if-absent at the archive key: an object already there (an earlier attempt
 *   wrote it) is read back and must have the planned digest; a different one is a conflict for an
 *   operator, never overwritten;
 * - `verify`: read the archived object back: whole-object sha256 and every member name and size.
 * Then the live copy at the archive is reported and created with the completion. It deletes
 * nothing: deleting the source is a separate, guarded physical-copy transition.
 *
 * @example
 * ```ts
 * handlers[OperationKind.LONG_TERM_ARCHIVE] = longTermArchiveHandler(env);
 * ```
 */
export function longTermArchiveHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const packageId = fieldOf(view, 'rawDataPackageId');
    const archiveId = fieldOf(view, 'destinationLocationId');
    const source = inputOf(view, ArtifactType.RAW_DATA_PACKAGE, fieldOf(view, 'sourceLocationId'));
    const path = (key: string) => join(env.storageRootOf(archiveId), key);

    const plan = await ctx.step('plan', async (): Promise<ArchivePlan> => {
      const data = await readCopy(source);
      const { manifest } = readPackage(data);
      return {
        key: archiveKeyOf(view.fields.archiveKey, packageId),
        sha256: sha256(data),
        size: data.length,
        members: manifest.members,
      };
    });
    ctx.signal.throwIfAborted();

    const stored = await ctx.step('upload', async (): Promise<StoredObject> => {
      const data = await readCopy(source);
      if (sha256(data) !== plan.sha256) {
        throw mismatch(`source ${source.path} changed since the archive was planned; plan again`);
      }
      const put = await putOnce(path(plan.key), data);
      await env.afterArchiveWrite?.(ctx);
      return put;
    });
    ctx.signal.throwIfAborted();

    await ctx.step('verify', async () => {
      const back = await readFile(path(plan.key));
      if (sha256(back) !== plan.sha256) {
        throw mismatch(
          `archived ${plan.key} reads back with sha256 ${sha256(back)}, not ${plan.sha256}`,
        );
      }
      const names = (m: Manifest['members']) => JSON.stringify(m.map((x) => [x.name, x.size]));
      const { manifest } = readPackage(back);
      if (names(manifest.members) !== names(plan.members)) {
        throw mismatch(`archived ${plan.key} holds other members than planned`);
      }
      return { verified: true, sha256: plan.sha256, members: plan.members.length };
    });

    return { outputs: [outputCopy(ArtifactType.RAW_DATA_PACKAGE, packageId, archiveId, stored)] };
  };
}
