import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { LocalArchiveStore, ReadArchive } from './archiveStore.ts';
import { type Manifest, readPackage, sha256 } from './packageFormat.ts';

/** What an archive object must be, as its archive record says. */
export interface ArchiveExpectation {
  readonly key: string;
  /** sha256 of the stored bytes at their first write. */
  readonly objectSha256: string;
  /** The physical object first written (`<device>:<inode>:<mtime ns>`), if recorded. */
  readonly objectVersion: string | null;
  /** sha256 of the package. */
  readonly contentSha256: string;
  /** The package's members as planned (name, size, sha256). */
  readonly members: Manifest['members'];
}

/** The outcome of reading an archive back and comparing it with its record. */
export interface ArchiveVerification {
  readonly ok: boolean;
  /** Every difference found, one sentence each (empty when `ok`). */
  readonly differences: readonly string[];
  /** The object as read (absent when it could not be read at all). */
  readonly read?: ReadArchive;
  /** The package inside it, when it could be opened. */
  readonly plain?: Buffer;
  /** Members checked by name, size and sha256. */
  readonly membersChecked: number;
}

/**
 * Reads an archive object back through its store and compares it with its record: the physical
 * object is the one first written (not replaced), the whole-object digest, the decrypted package
 * digest, and every member's name, size and sha256 against the planned manifest. Reports every
 * difference instead of stopping at the first; never changes anything.
 *
 * @example
 * ```ts
 * const v = await verifyArchive(store, expected);
 * if (!v.ok) console.log(v.differences.join('\n'));
 * ```
 */
export async function verifyArchive(
  store: LocalArchiveStore,
  expected: ArchiveExpectation,
): Promise<ArchiveVerification> {
  const differences: string[] = [];
  let read: ReadArchive;
  try {
    read = await store.read(expected.key);
  } catch (err) {
    // A missing or wrong key says nothing about the archive: the caller fixes its configuration.
    if (err instanceof OpstateError && err.code === OpstateErrorCode.CONFIG) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? `no object at key ${expected.key}`
        : `object at key ${expected.key} cannot be read: ${err instanceof Error ? err.message : String(err)}`;
    if (err instanceof OpstateError || code !== undefined) {
      return { ok: false, differences: [why], membersChecked: 0 };
    }
    throw err;
  }
  if (expected.objectVersion !== null && read.objectVersion !== expected.objectVersion) {
    differences.push(
      `the object was replaced or modified since it was first written (version ${read.objectVersion}, recorded ${expected.objectVersion})`,
    );
  }
  const whole = sha256(read.stored);
  if (whole !== expected.objectSha256) {
    differences.push(
      `whole-object sha256 is ${whole}, recorded ${expected.objectSha256} (${read.stored.length} bytes stored)`,
    );
  }
  let plain: Buffer;
  try {
    plain = store.open(read);
  } catch (err) {
    if (!(err instanceof OpstateError) || err.code === OpstateErrorCode.CONFIG) throw err;
    differences.push(err.message);
    return { ok: false, differences, read, membersChecked: 0 };
  }
  const content = sha256(plain);
  if (content !== expected.contentSha256) {
    differences.push(`package sha256 is ${content}, recorded ${expected.contentSha256}`);
  }
  let membersChecked = 0;
  try {
    const { manifest, members } = readPackage(plain);
    const found = new Map(members.map((m) => [m.name, m]));
    for (const want of expected.members) {
      const got = found.get(want.name);
      if (got === undefined) {
        differences.push(`member ${want.name} is missing`);
        continue;
      }
      membersChecked++;
      if (got.data.length !== want.size) {
        differences.push(`member ${want.name} has ${got.data.length} bytes, manifest ${want.size}`);
      } else if (sha256(got.data) !== want.sha256) {
        differences.push(
          `member ${want.name} has sha256 ${sha256(got.data)}, manifest ${want.sha256}`,
        );
      }
      found.delete(want.name);
    }
    for (const extra of found.keys()) differences.push(`member ${extra} is not in the manifest`);
    if (manifest.members.length !== expected.members.length) {
      differences.push(
        `the stored manifest lists ${manifest.members.length} members, the record ${expected.members.length}`,
      );
    }
  } catch (err) {
    if (!(err instanceof OpstateError)) throw err;
    differences.push(`the package does not read back: ${err.message}`);
  }
  return { ok: differences.length === 0, differences, read, plain, membersChecked };
}
