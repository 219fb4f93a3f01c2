import { lstat, realpath } from 'node:fs/promises';
import { basename, dirname, resolve, sep } from 'node:path';
import type { SyscallCount } from './SyscallCount.ts';

/**
 * Why `path` is not inside `storageRoot` once both are resolved on disk (`realpath`: every `..`
 * and every symlink on the way followed, the path's own last link too), or undefined when it is.
 * A path whose folder does not exist resolves no further than its folder's nearest existing
 * ancestor would say, so it is judged lexically from there: nothing is there to delete anyway.
 * A root that cannot be resolved refuses everything: nothing is known to be inside it.
 *
 * @example
 * ```ts
 * await outsideRoot('/srv/buffer/../etc/pkg', '/srv/buffer');
 * // 'resolves to /srv/etc/pkg, outside the storage root /srv/buffer of its location'
 * ```
 */
export async function outsideRoot(
  path: string,
  storageRoot: string,
  count?: SyscallCount,
): Promise<string | undefined> {
  let root: string;
  try {
    count?.add('realpath');
    root = await realpath(storageRoot);
  } catch (err) {
    return `its location's storage root ${storageRoot} cannot be resolved (${(err as NodeJS.ErrnoException).code}), so nothing is known to be inside it`;
  }
  const real = await resolved(path, count);
  if (real === root || real.startsWith(root.endsWith(sep) ? root : `${root}${sep}`)) {
    return undefined;
  }
  const via = root === resolve(storageRoot) ? '' : ` (${root} on disk)`;
  return `resolves to ${real}, outside the storage root ${storageRoot}${via} of its location`;
}

/** The path as the kernel would reach it; what does not exist is appended to what does. */
async function resolved(path: string, count: SyscallCount | undefined): Promise<string> {
  const absolute = resolve(path);
  try {
    count?.add('lstat');
    await lstat(path);
    count?.add('realpath');
    return await realpath(path);
  } catch {
    // Not there (or not reachable): resolve its folder instead, and so on up.
    const folder = dirname(path);
    if (folder === path || dirname(absolute) === absolute) return absolute;
    const parent = await resolved(folder, count);
    return resolve(parent, basename(path));
  }
}
