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
