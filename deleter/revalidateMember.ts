import { lstat, realpath } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';
import { sha256 } from '../machines/packageLayout.ts';
import { gitTracking } from './gitTracking.ts';
import { outsideRoot } from './insideRoot.ts';
import { scanOpenFiles } from './openFiles.ts';
import { type FileIdentity, readNoFollow } from './readNoFollow.ts';
import type { SyscallCount } from './SyscallCount.ts';

/** A planned member as revalidation needs it. */
export interface MemberToCheck extends FileIdentity {
  readonly path: string;
  /** The digest the verified archive holds for it (what its plan recorded). */
  readonly sha256: string;
}

/** The verdict on one member, immediately before its unlink. */
export type MemberVerdict =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly outcome: 'KEPT' | 'MISSING';
      readonly reason: string;
      /** Kept only because some process holds it open now: worth a recheck once it may close. */
      readonly held?: true;
    };

/**
 * Whether `path` lies under one of the prefixes (the prefix itself, or below it).
 *
 * @example
 * ```ts
 * protectedBy('/data/keep/a.fits', ['/data/keep']); // '/data/keep'
 * ```
 */
export function protectedBy(path: string, prefixes: readonly string[]): string | undefined {
  const p = resolve(path);
  return prefixes.find((prefix) => {
    const q = resolve(prefix);
    return p === q || p.startsWith(q.endsWith(sep) ? q : `${q}${sep}`);
  });
}

/**
 * The identity check alone: a regular file reached without following a symlink (`lstat`), with
 * the planned device, inode, size and mtime. Returns the reason it fails, or undefined.
 */
export async function identityProblem(
  member: MemberToCheck,
  count?: SyscallCount,
): Promise<MemberVerdict | undefined> {
  let st: Awaited<ReturnType<typeof lstat>>;
  try {
    count?.add('lstat');
    st = await lstat(member.path, { bigint: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      return {
        ok: false,
        outcome: 'MISSING',
        reason:
          'not there when revalidated; whether an earlier run of this deletion removed it cannot be verified',
      };
    }
    return { ok: false, outcome: 'KEPT', reason: `cannot be examined (${code ?? String(err)})` };
  }
  if (st.isSymbolicLink()) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: 'a symlink stands where a regular file was planned',
    };
  }
  if (!st.isFile()) {
    return { ok: false, outcome: 'KEPT', reason: 'no longer a regular file' };
  }
  if (String(st.dev) !== member.device || String(st.ino) !== member.inode) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `replaced by another file since planning (device:inode ${st.dev}:${st.ino}, planned ${member.device}:${member.inode})`,
    };
  }
  if (Number(st.size) !== member.size || String(st.mtimeNs) !== member.mtimeNs) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `modified since planning (size ${st.size}, mtime ${st.mtimeNs} ns; planned ${member.size}, ${member.mtimeNs} ns)`,
    };
  }
  return undefined;
}

/**
 * The bytes check alone: the file read now (no symlink followed, identity from its descriptor)
 * is still the planned file and its sha256 is the one the archive holds. Returns the reason it
 * fails, or undefined.
 */
export async function bytesProblem(
  member: MemberToCheck,
  count?: SyscallCount,
): Promise<MemberVerdict | undefined> {
  let read: Awaited<ReturnType<typeof readNoFollow>>;
  try {
    count?.add('open+fstat+read');
    read = await readNoFollow(member.path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      return {
        ok: false,
        outcome: 'MISSING',
        reason:
          'not there when revalidated; whether an earlier run of this deletion removed it cannot be verified',
      };
    }
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `cannot be read to compare with the archive (${code ?? (err instanceof Error ? err.message : String(err))})`,
    };
  }
  if (read.device !== member.device || read.inode !== member.inode) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `replaced by another file since planning (device:inode ${read.device}:${read.inode}, planned ${member.device}:${member.inode})`,
    };
  }
  const digest = sha256(read.data);
  if (digest !== member.sha256) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `the archive holds other bytes for it now (this file sha256 ${digest}, archived ${member.sha256}), though its size and mtime are as planned: an archive restore would not give it back byte for byte, so it is kept`,
    };
  }
  return undefined;
}

/**
 * Revalidates one planned member immediately before its unlink, with real system calls, in this
 * order; the first failure decides and the member is kept with the reason:
 * 1. identity (`identityProblem`): not there → MISSING; a symlink, not a regular file, another
 *    inode, another size or mtime → KEPT;
 * 1a. it resolves (`realpath`: `..` and symlinks followed) inside the storage root of its
 *    location as planned (`outsideRoot`);
 * 1b. its bytes, read again without following a symlink, have the digest the verified archive
 *    holds for it (`bytesProblem`): a file rewritten in place with its size and mtime put back
 *    is kept, never deleted on the strength of an archive of other bytes;
 * 2. its folder is reached without a symlink anywhere on the way (`realpath` of the parent equals
 *    the parent);
 * 3. outside every protected prefix of the policy as read now;
 * 4. not tracked by git in an enclosing work tree, as of the repository now (`gitTracking`);
 * 5. not open by any process (`scanOpenFiles` over `/proc/<pid>/fd`), and every process could be
 *    looked at.
 *
 * @example
 * ```ts
 * const verdict = await revalidateMember(member, facts.protectedPrefixes, plan.rootPath);
 * if (verdict.ok) await unlink(member.path);
 * ```
 */
export async function revalidateMember(
  member: MemberToCheck,
  protectedPrefixes: readonly string[],
  storageRoot: string,
  count?: SyscallCount,
): Promise<MemberVerdict> {
  const identity = await identityProblem(member, count);
  if (identity !== undefined) return identity;
  const outside = await outsideRoot(member.path, storageRoot, count);
  if (outside !== undefined) return { ok: false, outcome: 'KEPT', reason: outside };
  const held = await bytesProblem(member, count);
  if (held !== undefined) return held;
  const folder = dirname(resolve(member.path));
  let real: string;
  try {
    count?.add('realpath');
    real = await realpath(folder);
  } catch (err) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `its folder cannot be resolved (${(err as NodeJS.ErrnoException).code})`,
    };
  }
  if (real !== folder) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `its folder is reached through a symlink (${folder} → ${real})`,
    };
  }
  const prefix = protectedBy(member.path, protectedPrefixes);
  if (prefix !== undefined) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `under the protected prefix ${prefix} (the deletion policy as read at delete time)`,
    };
  }
  const git = await gitTracking(member.path, count);
  if (git.tracked === true) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `tracked by git in the work tree ${git.workTree}`,
    };
  }
  if (git.tracked === 'unknown') {
    return { ok: false, outcome: 'KEPT', reason: `git tracking unknown: ${git.why}` };
  }
  const open = scanOpenFiles(member.device, member.inode, count);
  const holder = open.holders[0];
  if (holder !== undefined) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `open by process ${holder.pid} (${holder.command})${open.holders.length > 1 ? ` and ${open.holders.length - 1} more` : ''}`,
      held: true,
    };
  }
  if (open.unreadable > 0) {
    return {
      ok: false,
      outcome: 'KEPT',
      reason: `the open files of ${open.unreadable} process(es) could not be read, so "not open" cannot be shown; run the deleter as root or with CAP_SYS_PTRACE`,
    };
  }
  return { ok: true };
}
