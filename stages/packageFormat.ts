import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { packTar, type TarMember, unpackTar } from './tar.ts';

/** What a package says it holds: every member's name, size and sha256. */
export interface Manifest {
  readonly members: readonly { name: string; size: number; sha256: string }[];
}

import { MANIFEST_NAME, sha256 } from '../machines/packageLayout.ts';

export { MANIFEST_NAME, sha256 };

/**
 * How a copy's checksum is written in `physical_copy.checksum`.
 *
 * @example
 * ```ts
 * checksumOf(sha256(bytes)); // 'sha256:ba7816bf…'
 * ```
 */
export const checksumOf = (hex: string): string => `sha256:${hex}`;

/**
 * The manifest of some members, in the order given.
 *
 * @example
 * ```ts
 * const manifest = manifestOf(members);
 * ```
 */
export function manifestOf(members: readonly TarMember[]): Manifest {
  return {
    members: members.map((m) => ({ name: m.name, size: m.data.length, sha256: sha256(m.data) })),
  };
}

/**
 * A package: a ustar archive whose first member is `MANIFEST.json` (name, size and sha256 of every
 * other member), then the members. Same members, same bytes.
 *
 * @example
 * ```ts
 * const bytes = writePackage([{ name: 'scan_0001.fits', data }]);
 * ```
 */
export function writePackage(members: readonly TarMember[]): Buffer {
  const manifest = Buffer.from(`${JSON.stringify(manifestOf(members), null, 2)}\n`);
  return packTar([{ name: MANIFEST_NAME, data: manifest }, ...members]);
}

/**
 * Reads a package and checks every member against its manifest: the same names in the same
 * order, and each one's size and sha256. A mismatch is a non-retryable `BAD_INPUT` (the bytes
 * will not change by trying again).
 *
 * @example
 * ```ts
 * const { manifest, members } = readPackage(await readFile(path));
 * ```
 */
export function readPackage(bytes: Uint8Array): { manifest: Manifest; members: TarMember[] } {
  const [head, ...members] = unpackTar(bytes);
  if (head?.name !== MANIFEST_NAME) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, `package has no leading ${MANIFEST_NAME}`);
  }
  let manifest: Manifest;
  try {
    manifest = JSON.parse(Buffer.from(head.data).toString('utf8')) as Manifest;
  } catch {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, `package ${MANIFEST_NAME} is not JSON`);
  }
  const actual = manifestOf(members);
  const expected = JSON.stringify(manifest.members);
  if (JSON.stringify(actual.members) !== expected) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `package members do not match its manifest (expected ${expected}, found ${JSON.stringify(actual.members)})`,
    );
  }
  return { manifest, members };
}
