import { constants } from 'node:fs';
import { mkdir, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { checkMemberName } from './memberName.ts';
import { MANIFEST_NAME, type Manifest, readPackage, sha256 } from './packageFormat.ts';
import { unpackTar } from './tar.ts';

/** One member as restored, checked after it was written. */
export interface RestoredMember {
  readonly name: string;
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly ok: boolean;
  /** What differs from the manifest, when not `ok`. */
  readonly problem?: string;
}

/**
 * Restores a package into a folder: `MANIFEST.json` and every member, each name checked
 * (`checkMemberName`, so a hostile name cannot escape the folder), each file created exclusively
 * (`wx`, never overwriting what is there, mode 0640: nothing for other users) and read back: its size and sha256 must equal the
 * manifest's, and the manifest must equal the one recorded. Returns every member with its
 * verdict; throws `BAD_INPUT` only when the package itself is unreadable or names a hostile member.
 *
 * @example
 * ```ts
 * const restored = await restorePackage(plainBytes, recordedMembers, '/tmp/rehearsal');
 * restored.every((m) => m.ok);
 * ```
 */
export async function restorePackage(
  plain: Uint8Array,
  recorded: Manifest['members'],
  toDir: string,
): Promise<RestoredMember[]> {
  const { members } = readPackage(plain);
  const [head] = unpackTar(plain);
  await mkdir(toDir, { recursive: true });
  const expected = new Map(recorded.map((m) => [m.name, m]));
  const out: RestoredMember[] = [];
  const write = async (name: string, data: Uint8Array) => {
    const path = join(toDir, checkMemberName(name, 'restore'));
    const handle = await open(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o640,
    ).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          `${path} already exists; restore into an empty folder (nothing is overwritten)`,
        );
      }
      throw err;
    });
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    return readFile(path);
  };
  await write(MANIFEST_NAME, head?.data ?? Buffer.alloc(0));
  for (const m of members) {
    const back = await write(m.name, m.data);
    const want = expected.get(m.name);
    const digest = sha256(back);
    const problem =
      want === undefined
        ? 'not in the recorded manifest'
        : back.length !== want.size
          ? `restored ${back.length} bytes, manifest ${want.size}`
          : digest !== want.sha256
            ? `restored sha256 ${digest}, manifest ${want.sha256}`
            : undefined;
    expected.delete(m.name);
    out.push({
      name: m.name,
      path: join(toDir, m.name),
      size: back.length,
      sha256: digest,
      ok: problem === undefined,
      ...(problem === undefined ? {} : { problem }),
    });
  }
  for (const missing of expected.values()) {
    out.push({
      name: missing.name,
      path: join(toDir, missing.name),
      size: 0,
      sha256: '',
      ok: false,
      problem: 'missing from the archived package',
    });
  }
  return out;
}
