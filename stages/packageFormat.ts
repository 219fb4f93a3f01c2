import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { packTar, type TarMember, unpackTar } from './tar.ts';

/** What a package says it holds: every member's name, size and sha256. */
export interface Manifest {
  readonly members: readonly { name: string; size: number; sha256: string }[];
}

import { MANIFEST_NAME, manifestBytes, sha256 } from '../machines/packageLayout.ts';

export { MANIFEST_NAME, manifestBytes, sha256 };

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
  return packTar([
    { name: MANIFEST_NAME, data: manifestBytes(manifestOf(members).members) },
    ...members,
  ]);
}

/**
 * A package that keeps a folder's own `MANIFEST.json` bytes as they are (extra fields, another
 * layout), then the members in the manifest's order: restoring it gives that manifest back byte
 * for byte. The caller has checked the manifest against the members (`parseManifest` and each
 * member's size and sha256).
 *
 * @example
 * ```ts
 * const bytes = packageWithManifest(await readFile('pkg/MANIFEST.json'), members);
 * ```
 */
export function packageWithManifest(manifest: Uint8Array, members: readonly TarMember[]): Buffer {
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
  // Name, size and sha256 of each entry, in order: a manifest may say more (its own fields).
  const expected = JSON.stringify(
    (Array.isArray(manifest?.members) ? manifest.members : []).map((m) => ({
      name: m?.name,
      size: m?.size,
      sha256: m?.sha256,
    })),
  );
  if (!Array.isArray(manifest?.members) || JSON.stringify(actual.members) !== expected) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `package members do not match its manifest (expected ${expected}, found ${JSON.stringify(actual.members)})`,
    );
  }
  return { manifest, members };
}
