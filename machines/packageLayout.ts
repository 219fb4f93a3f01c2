import { createHash } from 'node:crypto';

/*
 * What every layer agrees on about a package's bytes: the manifest's member name and the digest
 * its members are named by. The package format itself (stages/packageFormat.ts) builds on these;
 * the deleter checks against them.
 */

/** The manifest's own member name; it comes first in every package. */
export const MANIFEST_NAME = 'MANIFEST.json';

/**
 * The hex sha256 of some bytes.
 *
 * @example
 * ```ts
 * sha256(Buffer.from('abc')); // 'ba7816bf…'
 * ```
 */
export function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** One entry of a package's manifest. */
export interface ManifestEntry {
  readonly name: string;
  readonly size: number;
  readonly sha256: string;
}

/**
 * The `MANIFEST.json` bytes opstate writes for some members, in the order given: each entry's
 * name, size and sha256 (nothing else), two-space indented, with a final newline. A package
 * opstate builds from members alone carries exactly these bytes; a folder's own manifest may be
 * other bytes that say the same.
 *
 * @example
 * ```ts
 * manifestBytes([{ name: 'scan_0001.fits', size: 12, sha256: '…' }]);
 * ```
 */
export function manifestBytes(members: readonly ManifestEntry[]): Buffer {
  const entries = members.map(({ name, size, sha256 }) => ({ name, size, sha256 }));
  return Buffer.from(`${JSON.stringify({ members: entries }, null, 2)}\n`);
}
