import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** A file's identity as the deletion path compares it: device, inode, size, mtime (ns). */
export interface FileIdentity {
  readonly device: string;
  readonly inode: string;
  readonly size: number;
  readonly mtimeNs: string;
}

/** A regular file read without following a symlink, with the identity of what was read. */
export interface ReadFile extends FileIdentity {
  readonly data: Buffer;
}

/**
 * Reads a regular file without following a symlink at its last component (`O_NOFOLLOW`), and
 * takes its identity from the open descriptor (`fstat`), so the identity is that of the bytes
 * read. A symlink, a folder or anything but a regular file is a `BAD_INPUT` naming the path.
 *
 * @example
 * ```ts
 * const { data, inode, mtimeNs } = await readNoFollow('/buffer/pkg/scan_0001.fits');
 * ```
 */
export async function readNoFollow(path: string): Promise<ReadFile> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `${path} is a symlink; members are read only as regular files`,
        { details: { path } },
      );
    }
    throw err;
  }
  try {
    const st = await handle.stat({ bigint: true });
    if (!st.isFile()) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `${path} is not a regular file; members are regular files only`,
        { details: { path } },
      );
    }
    const data = await handle.readFile();
    return {
      data,
      device: String(st.dev),
      inode: String(st.ino),
      size: Number(st.size),
      mtimeNs: String(st.mtimeNs),
    };
  } finally {
    await handle.close();
  }
}
