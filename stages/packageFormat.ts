import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { packTar, type TarMember, unpackTar } from './tar.ts';

/** What a package says it holds: every member's name, size and sha256. */
export interface Manifest {
  readonly members: readonly { name: string; size: number; sha256: string }[];
}

import { MANIFEST_NAME, manifestBytes, sha256 } from '../machines/packageLayout.ts';

export { MANIFEST_NAME, manifestBytes, sha256 };

/**
 * The most bytes a package's `MANIFEST.json` may take: 8 MiB, about 35,000 members with names of
 * 99 bytes as `manifestBytes` writes them (more with shorter names). A manifest is refused over it
 * before it is parsed, since parsed JSON takes many times its bytes (an 8 MiB file of `{},` is
 * about three million objects); no package opstate writes has a larger one.
 */
export const MAX_MANIFEST_BYTES = 8 * 1024 * 1024;

/**
 * The JSON of a `MANIFEST.json`'s bytes, read from `where` (a package, a folder): `BAD_INPUT` for
 * bytes over `MAX_MANIFEST_BYTES`, refused before they are decoded, and for bytes that are not
 * JSON. What the JSON holds is for the caller to check.
 *
 * @example
 * ```ts
 * const parsed = manifestJson(await readFile('pkg/MANIFEST.json'), 'pkg');
 * ```
 */
export function manifestJson(data: Uint8Array, where: string): unknown {
  if (data.length > MAX_MANIFEST_BYTES) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${where}: ${MANIFEST_NAME} takes ${data.length} bytes, over the ${MAX_MANIFEST_BYTES}-byte cap; split the package into smaller ones`,
      { details: { bytes: data.length, maxBytes: MAX_MANIFEST_BYTES } },
    );
  }
  try {
    return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.length).toString('utf8'));
  } catch {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, `${where}: ${MANIFEST_NAME} is not JSON`);
  }
}

/** A manifest's bytes as a package's first member, refused when over `MAX_MANIFEST_BYTES`. */
function manifestMember(data: Uint8Array): TarMember {
  if (data.length > MAX_MANIFEST_BYTES) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `a package's ${MANIFEST_NAME} would take ${data.length} bytes, over the ${MAX_MANIFEST_BYTES}-byte cap that readers refuse above; split the package into smaller ones`,
      { details: { bytes: data.length, maxBytes: MAX_MANIFEST_BYTES } },
    );
  }
  return { name: MANIFEST_NAME, data };
}

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
  return packTar([manifestMember(manifestBytes(manifestOf(members).members)), ...members]);
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
  return packTar([manifestMember(manifest), ...members]);
}

/**
 * Reads a package and checks every member against its manifest: the same names in the same
 * order, and each one's size and sha256. A mismatch, a manifest over `MAX_MANIFEST_BYTES` (refused
 * before it is parsed) or one whose entries are not `{ name, size, sha256 }` is a non-retryable
 * `BAD_INPUT` (the bytes will not change by trying again); nothing else is thrown.
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
  const manifest = manifestJson(head.data, 'package') as Manifest | null;
  const found = JSON.stringify(manifestOf(members).members);
  const listed = Array.isArray(manifest?.members) ? (manifest.members as unknown[]) : undefined;
  const odd = listed?.findIndex((m) => !isEntry(m));
  if (listed === undefined || odd !== -1) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `package members do not match its manifest (${listed === undefined ? 'it lists no members' : `its entry ${odd} is not { name, size, sha256 }`}; found ${found})`,
    );
  }
  // Name, size and sha256 of each entry, in order: a manifest may say more (its own fields).
  const expected = JSON.stringify(
    (listed as Manifest['members']).map((m) => ({ name: m.name, size: m.size, sha256: m.sha256 })),
  );
  if (found !== expected) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `package members do not match its manifest (expected ${expected}, found ${found})`,
    );
  }
  return { manifest: manifest as Manifest, members };
}

/** Whether a manifest entry is `{ name, size, sha256 }` with values of those types. */
function isEntry(m: unknown): boolean {
  if (typeof m !== 'object' || m === null) return false;
  const { name, size, sha256 } = m as Record<string, unknown>;
  return typeof name === 'string' && typeof size === 'number' && typeof sha256 === 'string';
}
