import { lstat, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { MANIFEST_NAME, sha256 } from '../machines/packageLayout.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import type {
  DeletionPlanInsert,
  PlannedMemberRow,
  PlanOutcomeRow,
} from '../persistence/DeletionPlan.ts';
import { outsideRoot } from './insideRoot.ts';
import { readNoFollow } from './readNoFollow.ts';
import type { SyscallCount } from './SyscallCount.ts';

/** What the archive says the copy holds, and the archive a deletion will rely on. */
export interface PlanInput {
  readonly copy: PhysicalCopyRecord & { readonly storageRoot: string };
  readonly archive: {
    readonly operationId: string;
    readonly copyId: string;
    /** `sha256:<hex>` of the package. */
    readonly digest: string;
    readonly objectSha256: string;
  };
  /** The archived package: its members (name, size, sha256) and its manifest's own digest. */
  readonly archived: {
    readonly package: readonly { name: string; size: number; sha256: string }[];
    readonly manifestSha256: string | null;
    readonly contentSha256: string;
    readonly size: number;
  };
  /** Member paths an earlier plan of this copy already removed or found missing. */
  readonly alreadyGone: ReadonlySet<string>;
  readonly holder: string;
  readonly leaseMs: number;
  /** The id the plan is written under: a new time-ordered one (`timeOrderedId`) from the caller's clock. */
  readonly deletionId: string;
}

/** The storage root's identity: a deletion resumes only where the same filesystem is mounted. */
export async function rootIdentity(root: string): Promise<{ device: string; inode: string }> {
  const st = await lstat(root, { bigint: true });
  if (!st.isDirectory()) {
    throw new OpstateError(OpstateErrorCode.CONFIG, `storage root ${root} is not a folder here`);
  }
  return { device: String(st.dev), inode: String(st.ino) };
}

/**
 * Plans the deletion of a copy against its verified archive: every file the archived package says
 * the copy holds (an unpacked folder: `MANIFEST.json` and each member; a package file: itself) is
 * opened without following symlinks, identified (device, inode, size, mtime) and hashed. A file
 * whose bytes are exactly what the archive holds for it (for `MANIFEST.json`, the manifest inside
 * the archived package, not the digest the folder's own file had when archived) becomes a planned
 * member; one the archive holds differently, or a symlink, is KEPT at once with the reason; one that is absent is MISSING (unless an earlier plan already
 * accounted for it). Files in the folder that the package does not name are left alone and listed.
 * Nothing is deleted here: the plan is written, with START_DELETION, before any unlink.
 *
 * @example
 * ```ts
 * const plan = await planDeletion({ copy, archive, archived, alreadyGone: new Set(), holder, leaseMs,
 *   deletionId: timeOrderedId(clock.now()) });
 * await copies.apply(copy.id, { type: 'START_DELETION' }, { by: holder, plan });
 * ```
 */
export async function planDeletion(
  input: PlanInput,
  count?: SyscallCount,
): Promise<DeletionPlanInsert> {
  const { copy, archived } = input;
  if (copy.path === null) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, `copy ${copy.id} has no path to delete`);
  }
  const root = await rootIdentity(copy.storageRoot);
  let folder: boolean;
  try {
    count?.add('lstat');
    folder = (await lstat(copy.path)).isDirectory();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    folder = archived.manifestSha256 !== null && !copy.path.endsWith('.tar');
  }
  const expected = folder
    ? [
        { name: MANIFEST_NAME, size: -1, sha256: archived.manifestSha256 ?? '' },
        ...archived.package,
      ]
    : [{ name: basename(copy.path), size: archived.size, sha256: archived.contentSha256 }];
  const members: PlannedMemberRow[] = [];
  const outcomes: PlanOutcomeRow[] = [];
  let seq = 0;
  let bytes = 0;
  // A copy whose path leads out of its location (`..`, or a symlink on the way) is refused whole:
  // every member is kept with the reason, nothing under it is read, and the run that follows
  // deletes nothing and hands the copy to an operator (DELETION_FAILED).
  const outside = await outsideRoot(copy.path, copy.storageRoot, count);
  for (const want of expected) {
    const path = folder ? join(copy.path, want.name) : copy.path;
    if (input.alreadyGone.has(path)) continue;
    seq++;
    const planned =
      outside === undefined
        ? await planMember(seq, want, path, count)
        : refusedMember(seq, want, path, `the copy's path ${copy.path} ${outside}: refused`);
    members.push(planned.member);
    if (planned.outcome) outcomes.push(planned.outcome);
    else bytes += planned.member.size;
  }
  const unplanned =
    folder && outside === undefined ? await unplannedNames(copy.path, expected, count) : [];
  return {
    deletionId: input.deletionId,
    archiveOperationId: input.archive.operationId,
    archiveCopyId: input.archive.copyId,
    archiveDigest: input.archive.digest,
    archiveObjectSha256: input.archive.objectSha256,
    path: copy.path,
    folder,
    rootPath: copy.storageRoot,
    rootDevice: root.device,
    rootInode: root.inode,
    holder: input.holder,
    leaseMs: input.leaseMs,
    members,
    outcomes,
    detail: {
      members: members.length,
      planned: members.length - outcomes.length,
      keptAtPlan: outcomes.filter((o) => o.outcome === 'KEPT').length,
      missingAtPlan: outcomes.filter((o) => o.outcome === 'MISSING').length,
      bytes,
      unplanned,
    },
  };
}

type WantedMember = { readonly name: string; readonly size: number; readonly sha256: string };

/**
 * One member as the plan sees it: identified and hashed without following symlinks, with an
 * outcome at once when it is absent, unreadable or holds other bytes than the archive.
 */
async function planMember(
  seq: number,
  want: WantedMember,
  path: string,
  count: SyscallCount | undefined,
): Promise<{ member: PlannedMemberRow; outcome?: PlanOutcomeRow }> {
  const { name, sha256: archived } = want;
  try {
    count?.add('open+fstat+read');
    const read = await readNoFollow(path);
    const digest = sha256(read.data);
    const { device, inode, size, mtimeNs } = read;
    const member = { seq, name, path, device, inode, size, mtimeNs, sha256: archived };
    if (digest === archived) return { member };
    return {
      member,
      outcome: {
        seq,
        outcome: 'KEPT',
        reason: `the archive holds other bytes for it (this file sha256 ${digest}, archived ${archived || 'nothing'}): an archive restore would not give it back byte for byte, so it is kept`,
      },
    };
  } catch (err) {
    const size = Math.max(0, want.size);
    const member = {
      seq,
      name,
      path,
      device: '-',
      inode: '-',
      size,
      mtimeNs: '-',
      sha256: archived,
    };
    const code = (err as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT'
        ? 'not there when the deletion was planned'
        : err instanceof OpstateError
          ? err.message
          : `cannot be read (${code ?? String(err)})`;
    return { member, outcome: { seq, outcome: code === 'ENOENT' ? 'MISSING' : 'KEPT', reason } };
  }
}

/** A member planned as KEPT without being read: its identity unknown ('-'), the reason given. */
function refusedMember(
  seq: number,
  want: WantedMember,
  path: string,
  reason: string,
): { member: PlannedMemberRow; outcome: PlanOutcomeRow } {
  const { name, sha256: archived } = want;
  const size = Math.max(0, want.size);
  const member = { seq, name, path, device: '-', inode: '-', size, mtimeNs: '-', sha256: archived };
  return { member, outcome: { seq, outcome: 'KEPT', reason } };
}

/** Files in the copy's folder that the archived package does not name: left alone, listed. */
async function unplannedNames(
  folder: string,
  expected: readonly WantedMember[],
  count: SyscallCount | undefined,
): Promise<string[]> {
  const names = new Set(expected.map((e) => e.name));
  try {
    count?.add('readdir');
    return (await readdir(folder)).filter((n) => !names.has(n)).sort();
  } catch {
    return [];
  }
}
