import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { ArchiveStore } from './ArchiveStore.ts';
import type { ArchiveCipher } from './archiveCipher.ts';
import { openArchiveObject, type ReadArchive, readArchiveObject } from './archiveObject.ts';
import { MANIFEST_NAME, type Manifest, readPackage, sha256 } from './packageFormat.ts';
import { unpackTar } from './tar.ts';

/** A source member a deletion removed, relying on this archive: the archive must hold its bytes. */
export interface DeletedMember {
  readonly path: string;
  /** Its name in the package (`MANIFEST.json` or a member), for a member of a folder copy. */
  readonly name: string;
  /** Its copy was an unpacked folder (else a package file: the whole package is the member). */
  readonly folder: boolean;
  /** The digest its deletion plan recorded. */
  readonly sha256: string;
}

/** What an archive object must be, as its archive record says. */
export interface ArchiveExpectation {
  readonly key: string;
  /** sha256 of the stored bytes at their first write. */
  readonly objectSha256: string;
  /** The store's version of the physical object first written (opaque), if recorded. */
  readonly objectVersion: string | null;
  /** sha256 of the package. */
  readonly contentSha256: string;
  /** The package's members as planned (name, size, sha256). */
  readonly members: Manifest['members'];
  /** Source members already deleted on the strength of this archive (none while archiving). */
  readonly deleted?: readonly DeletedMember[];
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
  /** Deleted source members found in the archive with the very bytes that were deleted. */
  readonly deletedHeld?: number;
}

/**
 * Reads an archive object back through its store and compares it with its record: the physical
 * object is the one first written (not replaced), the whole-object digest, the decrypted package
 * digest, every member's name, size and sha256 against the planned manifest, and every source
 * member already deleted on its strength: the archive must hold exactly the bytes that were
 * deleted (`MANIFEST.json` included), else that member is named as a difference. Reports every
 * difference instead of stopping at the first; never changes anything.
 *
 * @example
 * ```ts
 * const v = await verifyArchive(store, expected, cipher);
 * if (!v.ok) console.log(v.differences.join('\n'));
 * ```
 */
export async function verifyArchive(
  store: ArchiveStore,
  expected: ArchiveExpectation,
  cipher: ArchiveCipher | undefined,
): Promise<ArchiveVerification> {
  const differences: string[] = [];
  let read: ReadArchive;
  try {
    read = await readArchiveObject(store, expected.key);
  } catch (err) {
    // A missing or wrong key says nothing about the archive: the caller fixes its configuration.
    if (err instanceof OpstateError && err.code === OpstateErrorCode.CONFIG) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      err instanceof OpstateError && err.code === OpstateErrorCode.NOT_FOUND
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
  if (read.storeSha256 !== undefined && read.storeSha256 !== whole) {
    differences.push(
      `the store keeps sha256 ${read.storeSha256} for bytes whose sha256 is ${whole}`,
    );
  }
  let plain: Buffer;
  try {
    plain = openArchiveObject(read, cipher);
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
  let deletedHeld = 0;
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
    const gone = deletedNotHeld(plain, expected.deleted ?? []);
    deletedHeld = gone.held;
    differences.push(...gone.differences);
  } catch (err) {
    if (!(err instanceof OpstateError)) throw err;
    differences.push(`the package does not read back: ${err.message}`);
  }
  return { ok: differences.length === 0, differences, read, plain, membersChecked, deletedHeld };
}

/**
 * Whether a package holds, byte for byte, every source member deleted on its strength: a folder
 * member by its name (`MANIFEST.json` is the package's first member, as stored), a package file as
 * the whole package. One difference per member it cannot give back, naming it.
 *
 * @example
 * ```ts
 * const { held, differences } = deletedNotHeld(plain, recorded.expected.deleted ?? []);
 * ```
 */
export function deletedNotHeld(
  plain: Uint8Array,
  deleted: readonly DeletedMember[],
): { held: number; differences: string[] } {
  const [head, ...members] = unpackTar(plain);
  const digests = new Map(members.map((m): [string, string] => [m.name, sha256(m.data)]));
  if (head?.name === MANIFEST_NAME) digests.set(MANIFEST_NAME, sha256(head.data));
  const content = sha256(plain);
  let held = 0;
  const differences: string[] = [];
  for (const gone of deleted) {
    const holds = gone.folder ? digests.get(gone.name) : content;
    if (holds === gone.sha256) {
      held++;
      continue;
    }
    differences.push(
      `deleted source member ${gone.path} (sha256 ${gone.sha256}) is not in the archive as it was: the archive holds ${holds === undefined ? `no ${gone.name}` : `sha256 ${holds} for ${gone.folder ? gone.name : 'the package'}`}, so a restore does not give it back byte for byte`,
    );
  }
  return { held, differences };
}
