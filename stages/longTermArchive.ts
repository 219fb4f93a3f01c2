import { hostname } from 'node:os';
import { ArchiveState } from '../machines/ArchiveState.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import {
  type ArchiveFields,
  ArchiveRecordRepository,
} from '../persistence/ArchiveRecordRepository.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { OperationHandler } from '../worker/OperationHandler.ts';
import { checkArchiveKey, LocalArchiveStore } from './archiveStore.ts';
import { checksumOf, type Manifest, sha256 } from './packageFormat.ts';
import { readPackageSource, type SourceMember } from './packageSource.ts';
import { fieldOf, inputOf, type StageEnvironment } from './StageEnvironment.ts';
import { verifyArchive } from './verifyArchive.ts';

/** A planned member: its name, size, digest and the identity it had when planned. */
export type PlannedMember = Omit<SourceMember, 'path'>;

/** What the `plan` step records (and the PLANNED row of the archive record holds). */
export interface ArchivePlan {
  readonly key: string;
  readonly contentSha256: string;
  readonly size: number;
  /** The source copy is an unpacked folder (one member per file) or a package file. */
  readonly folder: boolean;
  /** The source's files, as planned. */
  readonly members: readonly PlannedMember[];
  /** The package's own manifest (name, size, sha256 of every member but the manifest). */
  readonly manifest: Manifest['members'];
  /** sha256 of the source's own `MANIFEST.json`. */
  readonly manifestSha256: string;
  /**
   * sha256 of the `MANIFEST.json` inside the package, the one the archive holds (equal to
   * `manifestSha256` unless the package carries a regenerated manifest). A deletion removes the
   * source's manifest only when the two are equal.
   */
  readonly packageManifestSha256: string;
  readonly encrypted: boolean;
  readonly keyId: string | null;
}

/** What the `upload` step records. */
interface Uploaded {
  readonly path: string;
  readonly objectSha256: string;
  readonly objectVersion: string;
  readonly objectSize: number;
  readonly outcome: 'created' | 'identical';
}

const by = `${hostname()}:${process.pid}`;

function sameMembers(planned: readonly PlannedMember[], now: readonly SourceMember[]): string[] {
  const found = new Map(now.map((m) => [m.name, m]));
  const changes: string[] = [];
  for (const p of planned) {
    const m = found.get(p.name);
    if (m === undefined) changes.push(`${p.name} is gone`);
    else if (m.sha256 !== p.sha256 || m.size !== p.size) changes.push(`${p.name} has new content`);
    else if (m.device !== p.device || m.inode !== p.inode || m.mtimeNs !== p.mtimeNs) {
      changes.push(`${p.name} is another file now (device, inode or mtime differ)`);
    }
  }
  if (now.length !== planned.length)
    changes.push(`${now.length} members now, ${planned.length} planned`);
  return changes;
}

/**
 * Long-term archive, the archive half of archive-then-delete, as three durable steps, each also
 * appended to the batch's archive record (`ArchiveState`), which is what a restart resumes from:
 * - `plan` (PLANNED): read the source copy — an unpacked package folder or a package file — every
 *   file without following symlinks, check it against its manifest and record, and record the
 *   archive key, the package digest and every member's name, size, sha256, device, inode, mtime;
 * - `upload` (UPLOADED, or CONFLICT): check the source is still exactly what was planned, pack the
 *   planned members into the deterministic package and create it at the key if absent (encrypted
 *   with AES-256-GCM when a key is configured). An object already there (an earlier attempt wrote
 *   it) is read back and compared; another one is a CONFLICT for an operator, never overwritten;
 * - `verify` (READ_BACK, VERIFIED; or VERIFY_FAILED): read the object back through the same store:
 *   it is the object first written, whole-object digest, package digest, and every member name,
 *   size and sha256.
 * Then the live copy at the archive is created with the completion. Deleting the source is not
 * this handler's business: it is the copy's own guarded state machine (`CopyDeleter`).
 *
 * @example
 * ```ts
 * handlers[OperationKind.LONG_TERM_ARCHIVE] = longTermArchiveHandler(env);
 * ```
 */
export function longTermArchiveHandler(env: StageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const operationId = ctx.operation.id;
    const attempt = ctx.operation.attempt;
    const packageId = fieldOf(view, 'rawDataPackageId');
    const archiveId = fieldOf(view, 'destinationLocationId');
    const source = inputOf(view, ArtifactType.RAW_DATA_PACKAGE, fieldOf(view, 'sourceLocationId'));
    const records = new ArchiveRecordRepository(env.database);
    const store = new LocalArchiveStore(env.storageRootOf(archiveId), env.cipher);
    const faults = env.faults;
    const record = (state: ArchiveState, fields: ArchiveFields) =>
      records.append({ operationId, attempt, state, by, ...fields });

    const plan = await ctx.step('plan', async (): Promise<ArchivePlan> => {
      const read = await readPackageSource(source);
      const planned: ArchivePlan = {
        key: checkArchiveKey(view.fields.archiveKey ?? `raw_data_package/${packageId}.tar`),
        contentSha256: sha256(read.bytes),
        size: read.bytes.length,
        folder: read.folder,
        members: read.members.map(({ path: _path, data: _data, ...m }) => m),
        manifest: read.manifest.members,
        manifestSha256: read.manifestSha256,
        packageManifestSha256: read.packageManifestSha256,
        encrypted: env.cipher !== undefined,
        keyId: env.cipher?.keyId ?? null,
      };
      await record(ArchiveState.PLANNED, {
        archiveKey: planned.key,
        contentSha256: planned.contentSha256,
        size: planned.size,
        encrypted: planned.encrypted,
        keyId: planned.keyId,
        manifest: {
          members: planned.members,
          package: planned.manifest,
          manifestSha256: planned.manifestSha256,
          packageManifestSha256: planned.packageManifestSha256,
        },
        detail: { sourceCopyId: source.id, sourcePath: source.path, folder: planned.folder },
      });
      return planned;
    });
    ctx.signal.throwIfAborted();
    await faults?.beforeUpload?.(ctx);

    const uploaded = await ctx.step('upload', async (): Promise<Uploaded> => {
      const read = await readPackageSource(source);
      const changes = sameMembers(plan.members, read.members);
      if (changes.length > 0 || sha256(read.bytes) !== plan.contentSha256) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `source ${source.path} changed since the archive was planned (${changes.join('; ') || 'other package bytes'}); nothing was written: re-plan it with \`opstate retry ${operationId} --replan\``,
          { details: { operationId, changes } },
        );
      }
      let put: Awaited<ReturnType<LocalArchiveStore['put']>>;
      try {
        put = await store.put(plan.key, read.bytes, {
          ...(faults?.midUpload === undefined
            ? {}
            : { afterPartialWrite: () => faults.midUpload?.(ctx) }),
        });
      } catch (err) {
        if (err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT) {
          await record(ArchiveState.CONFLICT, {
            archiveKey: plan.key,
            contentSha256: plan.contentSha256,
            detail: { message: err.message },
          });
        }
        throw err;
      }
      await record(ArchiveState.UPLOADED, {
        archiveKey: plan.key,
        objectVersion: put.objectVersion,
        objectSha256: put.objectSha256,
        contentSha256: put.contentSha256,
        size: put.contentSize,
        encrypted: put.encrypted,
        keyId: put.keyId,
        detail: { outcome: put.outcome, objectSize: put.objectSize },
      });
      await faults?.afterStore?.(ctx);
      return {
        path: put.path,
        objectSha256: put.objectSha256,
        objectVersion: put.objectVersion,
        objectSize: put.objectSize,
        outcome: put.outcome,
      };
    });
    ctx.signal.throwIfAborted();
    await faults?.afterUpload?.(ctx, uploaded.path);

    await ctx.step('verify', async () => {
      const v = await verifyArchive(store, {
        key: plan.key,
        objectSha256: uploaded.objectSha256,
        objectVersion: uploaded.objectVersion,
        contentSha256: plan.contentSha256,
        members: plan.manifest,
      });
      const identity = {
        archiveKey: plan.key,
        objectVersion: uploaded.objectVersion,
        objectSha256: uploaded.objectSha256,
        contentSha256: plan.contentSha256,
        size: plan.size,
        encrypted: plan.encrypted,
        keyId: plan.keyId,
      };
      if (!v.ok) {
        await record(ArchiveState.VERIFY_FAILED, {
          ...identity,
          detail: { differences: v.differences },
        });
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `archived ${plan.key} does not read back as written (${v.differences.join('; ')}); it is never VERIFIED and the source is kept: investigate the archive storage, then \`opstate retry ${operationId} --replan\``,
          { details: { operationId, differences: v.differences } },
        );
      }
      await record(ArchiveState.READ_BACK, identity);
      await faults?.duringReadBack?.(ctx);
      await record(ArchiveState.VERIFIED, {
        ...identity,
        detail: { membersChecked: v.membersChecked },
      });
      return { verified: true, membersChecked: v.membersChecked };
    });
    await faults?.afterVerified?.(ctx);

    return {
      outputs: [
        {
          artifactType: ArtifactType.RAW_DATA_PACKAGE,
          artifactId: packageId,
          locationId: archiveId,
          path: uploaded.path,
          checksum: checksumOf(plan.contentSha256),
          size: plan.size,
        },
      ],
    };
  };
}
