import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { SyscallCount } from './SyscallCount.ts';

/** A process that holds a file open. */
export interface Holder {
  readonly pid: number;
  readonly command: string;
}

/** What a scan of `/proc/<pid>/fd` found for one file. */
export interface OpenFileScan {
  readonly holders: readonly Holder[];
  /** Processes whose descriptors could not be read (permission): the scan cannot vouch for them. */
  readonly unreadable: number;
}

function commandOf(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/**
 * Which processes hold a file open, by scanning every `/proc/<pid>/fd/*` link and comparing the
 * device and inode it resolves to (so a hard link or a renamed path is found too). A process that
 * exits during the scan is skipped; one whose descriptors cannot be read is counted in
 * `unreadable`, because a scan that could not look cannot say "not open". Synchronous on purpose:
 * one pass over a few thousand descriptors is quicker without the thread pool, and short.
 *
 * @example
 * ```ts
 * const { holders } = scanOpenFiles('2049', '1835013');
 * if (holders.length > 0) keep(`open by pid ${holders[0].pid}`);
 * ```
 */
export function scanOpenFiles(device: string, inode: string, count?: SyscallCount): OpenFileScan {
  const holders: Holder[] = [];
  let unreadable = 0;
  count?.add('readdir');
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let fds: string[];
    try {
      count?.add('readdir');
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') unreadable++;
      continue; // ENOENT/ESRCH: the process is gone
    }
    for (const fd of fds) {
      let st: ReturnType<typeof statSync>;
      try {
        count?.add('stat');
        st = statSync(`/proc/${pid}/fd/${fd}`, { bigint: true });
      } catch {
        continue; // closed meanwhile, or a link that resolves to nothing
      }
      if (st !== undefined && String(st.dev) === device && String(st.ino) === inode) {
        holders.push({ pid: Number(pid), command: commandOf(pid) });
        break;
      }
    }
  }
  return { holders, unreadable };
}
