import { hostname } from 'node:os';
import { ArchiveState } from '../machines/ArchiveState.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import {
  type ArchiveFields,
  ArchiveRecordRepository,
} from '../persistence/ArchiveRecordRepository.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { HandlerContext, OperationHandler } from '../worker/OperationHandler.ts';
import type { ArchiveStore } from './ArchiveStore.ts';
import type { ArchiveCipher } from './archiveCipher.ts';
import { checkArchiveKey, storeArchive } from './archiveObject.ts';
import { checksumOf, type Manifest, sha256 } from './packageFormat.ts';
import { type PackageSource, readPackageSource, type SourceMember } from './packageSource.ts';
import { type ArchiveFaults, fieldOf, inputOf } from './StageEnvironment.ts';
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

/** What the `upload` step records. */
export interface Uploaded {
  /** Where the store keeps the object (`ArchiveStore.describe`). */
  readonly location: string;
  readonly objectSha256: string;
  readonly objectVersion: string;
  readonly objectSize: number;
  readonly outcome: 'created' | 'identical';
}

/**
 * What the archive protocol needs from where it runs. The archive record is appended through the
 * worker's own database (`ctx.withDatabase`), so it rides a Postgres outage as the rest of the
 * attempt does.
 */
export interface ArchiveStageEnvironment {
  /**
   * The store of an archive location (`StageEnvironment.archiveStoreOf`), for the attempt `ctx`
   * (which may read the location through `ctx.withDatabase`).
   */
  archiveStoreOf(locationId: string, ctx: HandlerContext): ArchiveStore | Promise<ArchiveStore>;
  /** Seals archives at rest when given (see `archiveCipherFromEnv`). */
  readonly cipher?: ArchiveCipher;
  /** Drills only: crash points. */
  readonly faults?: ArchiveFaults;
}

/** The package an archive run stores: read at planning and again at upload (it must not change). */
export interface ArchiveSource {
  /** Reads it: its members with their identity, and the package bytes they make. */
  read(): Promise<PackageSource>;
  /** What the PLANNED row says of it (copy id, path). */
  readonly detail: Readonly<Record<string, unknown>>;
  /** How a message names it. */
  readonly name: string;
}

/** One archive run: the attempt, its store and how it appends to the archive record. */
interface Run {
  readonly ctx: HandlerContext;
  readonly store: ArchiveStore;
  readonly cipher: ArchiveCipher | undefined;
  readonly faults: ArchiveFaults | undefined;
  record(state: ArchiveState, fields: ArchiveFields): Promise<unknown>;
}

async function planStep(run: Run, key: string, source: ArchiveSource): Promise<ArchivePlan> {
  return run.ctx.step('plan', async (): Promise<ArchivePlan> => {
    const read = await source.read();
    const planned: ArchivePlan = {
      key: checkArchiveKey(key),
      contentSha256: sha256(read.bytes),
      size: read.bytes.length,
      folder: read.folder,
      members: read.members.map(({ path: _path, data: _data, ...m }) => m),
      manifest: read.manifest.members,
      manifestSha256: read.manifestSha256,
      packageManifestSha256: read.packageManifestSha256,
      encrypted: run.cipher !== undefined,
      keyId: run.cipher?.keyId ?? null,
    };
    await run.record(ArchiveState.PLANNED, {
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
      detail: { ...source.detail, folder: planned.folder },
    });
    return planned;
  });
}

async function uploadStep(run: Run, plan: ArchivePlan, source: ArchiveSource): Promise<Uploaded> {
  const { ctx, faults } = run;
  return ctx.step('upload', async (): Promise<Uploaded> => {
    const read = await source.read();
    const changes = sameMembers(plan.members, read.members);
    if (changes.length > 0 || sha256(read.bytes) !== plan.contentSha256) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `source ${source.name} changed since the archive was planned (${changes.join('; ') || 'other package bytes'}); nothing was written: re-plan it with \`opstate retry ${ctx.operation.id} --replan\``,
        { details: { operationId: ctx.operation.id, changes } },
      );
    }
    let put: Awaited<ReturnType<typeof storeArchive>>;
    try {
      put = await storeArchive(run.store, plan.key, read.bytes, run.cipher, {
        ...(faults?.midUpload === undefined
          ? {}
          : { afterPartialWrite: () => faults.midUpload?.(ctx) }),
      });
    } catch (err) {
      if (err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT && !err.retryable) {
        await run.record(ArchiveState.CONFLICT, {
          archiveKey: plan.key,
          contentSha256: plan.contentSha256,
          detail: { message: err.message },
        });
      }
      throw err;
    }
    await run.record(ArchiveState.UPLOADED, {
      archiveKey: plan.key,
      objectVersion: put.objectVersion,
      objectSha256: put.objectSha256,
      contentSha256: put.contentSha256,
      size: put.contentSize,
      encrypted: put.encrypted,
      keyId: put.keyId,
      detail: { outcome: put.outcome, objectSize: put.objectSize, location: put.location },
    });
    await faults?.afterStore?.(ctx);
    const { location, objectSha256, objectVersion, objectSize, outcome } = put;
    return { location, objectSha256, objectVersion, objectSize, outcome };
  });
}

async function verifyStep(run: Run, plan: ArchivePlan, uploaded: Uploaded): Promise<void> {
  const { ctx } = run;
  await ctx.step('verify', async () => {
    const v = await verifyArchive(
      run.store,
      {
        key: plan.key,
        objectSha256: uploaded.objectSha256,
        objectVersion: uploaded.objectVersion,
        contentSha256: plan.contentSha256,
        members: plan.manifest,
      },
      run.cipher,
    );
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
      await run.record(ArchiveState.VERIFY_FAILED, {
        ...identity,
        detail: { differences: v.differences },
      });
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `archived ${plan.key} does not read back as written (${v.differences.join('; ')}); it is never VERIFIED and the source is kept: investigate the archive storage, then \`opstate retry ${ctx.operation.id} --replan\``,
        { details: { operationId: ctx.operation.id, differences: v.differences } },
      );
    }
    await run.record(ArchiveState.READ_BACK, identity);
    await run.faults?.duringReadBack?.(ctx);
    await run.record(ArchiveState.VERIFIED, {
      ...identity,
      detail: { membersChecked: v.membersChecked },
    });
    return { verified: true, membersChecked: v.membersChecked };
  });
}

/**
 * The archive protocol, the same around every store, as three durable steps of the attempt, each
 * also appended to the batch's archive record (`ArchiveState`, through `ctx.withDatabase`: a
 * Postgres outage is waited out, not failed), which is what a restart resumes from:
 * - `plan` (PLANNED): read the source — every file without following symlinks, checked against its
 *   manifest and record — and record the key, the package digest and every member's name, size,
 *   sha256 and identity;
 * - `upload` (UPLOADED, or CONFLICT): check the source is still exactly what was planned, then
 *   store the package at the key if absent (sealed with AES-256-GCM when a key is configured). An
 *   object already there is read back and opened: the same package is `identical`, another one a
 *   CONFLICT for an operator, never overwritten;
 * - `verify` (READ_BACK, VERIFIED; or VERIFY_FAILED): read the object back through the store: the
 *   version first written, the whole-object digest, the package digest, and every member's name,
 *   size and sha256.
 * Returns the plan and the stored object. A store only stores bytes (`ArchiveStore`).
 *
 * @example
 * ```ts
 * const { plan, uploaded } = await runArchiveProtocol(ctx, env, store, key, source);
 * ```
 */
export async function runArchiveProtocol(
  ctx: HandlerContext,
  env: Pick<ArchiveStageEnvironment, 'cipher' | 'faults'>,
  store: ArchiveStore,
  key: string,
  source: ArchiveSource,
): Promise<{ plan: ArchivePlan; uploaded: Uploaded }> {
  const { id: operationId, attempt } = ctx.operation;
  const run: Run = {
    ctx,
    store,
    cipher: env.cipher,
    faults: env.faults,
    // The worker's database, through an outage: an append run again after its reply was lost
    // finds the row it wrote (one row per state and attempt).
    record: (state, fields) =>
      ctx.withDatabase(`appending ${state} to the archive record of`, (database) =>
        new ArchiveRecordRepository(database as Database).append({
          operationId,
          attempt,
          state,
          by,
          ...fields,
        }),
      ),
  };
  const plan = await planStep(run, key, source);
  ctx.signal.throwIfAborted();
  await env.faults?.beforeUpload?.(ctx);
  const uploaded = await uploadStep(run, plan, source);
  ctx.signal.throwIfAborted();
  await env.faults?.afterUpload?.(ctx, uploaded.location);
  await verifyStep(run, plan, uploaded);
  await env.faults?.afterVerified?.(ctx);
  return { plan, uploaded };
}

/**
 * Long-term archive, the archive half of archive-then-delete: the operation's raw data package
 * copy at `sourceLocationId` (an unpacked package folder or a package file) is archived at
 * `destinationLocationId` through that location's store (`env.archiveStoreOf`) by the archive
 * protocol (`runArchiveProtocol`), under `archiveKey` (default `raw_data_package/<id>.tar`). Then
 * the live copy at the archive is created with the completion, which requires the VERIFIED record
 * (the kind's output contract). Deleting the source is not this handler's business: it is the
 * copy's own guarded state machine (`CopyDeleter`).
 *
 * @example
 * ```ts
 * handlers[OperationKind.LONG_TERM_ARCHIVE] = longTermArchiveHandler(env);
 * ```
 */
export function longTermArchiveHandler(env: ArchiveStageEnvironment): OperationHandler {
  return async (ctx) => {
    const view = await ctx.inspect();
    const packageId = fieldOf(view, 'rawDataPackageId');
    const archiveId = fieldOf(view, 'destinationLocationId');
    const copy = inputOf(view, ArtifactType.RAW_DATA_PACKAGE, fieldOf(view, 'sourceLocationId'));
    const store = await env.archiveStoreOf(archiveId, ctx);
    const source: ArchiveSource = {
      read: () => readPackageSource(copy),
      detail: { sourceCopyId: copy.id, sourcePath: copy.path },
      name: String(copy.path),
    };
    const key = archiveKeyOf(view.fields, packageId);
    const archived = await runArchiveProtocol(ctx, env, store, key, source);
    return { outputs: [archivedCopy(packageId, archiveId, archived)] };
  };
}

/** The key a package is archived under: the operation's `archiveKey`, else one per package. */
export function archiveKeyOf(fields: { readonly archiveKey?: string }, packageId: string): string {
  return fields.archiveKey ?? `raw_data_package/${packageId}.tar`;
}

/**
 * The copy a verified archive leaves at the archive location, as the kind's output contract asks
 * for it: the package, where the store put it, with the verified content's checksum and size.
 */
export function archivedCopy(
  packageId: string,
  archiveId: string,
  archived: { readonly plan: ArchivePlan; readonly uploaded: Uploaded },
) {
  return {
    artifactType: ArtifactType.RAW_DATA_PACKAGE,
    artifactId: packageId,
    locationId: archiveId,
    path: archived.uploaded.location,
    checksum: checksumOf(archived.plan.contentSha256),
    size: archived.plan.size,
  };
}
