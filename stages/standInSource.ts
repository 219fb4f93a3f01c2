import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import type { ArchiveSource } from './longTermArchive.ts';
import { writePackage } from './packageFormat.ts';
import { readPackageSource } from './packageSource.ts';
import { putOnce } from './storage.ts';

/**
 * The stand-in source `archiveStandIn` archives: a one-member package for `packageId` (`data.bin`
 * holding `package <id>`), the same bytes at the same path on every call (so a retry plans and
 * uploads what an earlier attempt did), written once under the OS temp folder.
 *
 * @example
 * ```ts
 * const source = await standInSource(packageId);
 * ```
 */
export async function standInSource(packageId: string): Promise<ArchiveSource> {
  const path = join(tmpdir(), 'opstate-test-archive-sources', `${packageId}.tar`);
  await putOnce(
    path,
    writePackage([{ name: 'data.bin', data: Buffer.from(`package ${packageId}`) }]),
  );
  const copy = { id: `test-source-${packageId}`, path, checksum: null, size: null };
  return {
    read: () => readPackageSource(copy as unknown as PhysicalCopyRecord),
    detail: { sourcePath: path, testSource: true },
    name: path,
  };
}
