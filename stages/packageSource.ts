import { lstat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { type FileIdentity, readNoFollow } from '../deleter/readNoFollow.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import { checkMemberName } from './memberName.ts';
import {
  checksumOf,
  MANIFEST_NAME,
  type Manifest,
  manifestBytes,
  manifestJson,
  packageWithManifest,
  readPackage,
  sha256,
  writePackage,
} from './packageFormat.ts';
import { unpackTar } from './tar.ts';

/**
 * One file of a copy on disk: its name in the package, where it is, its identity when read, and
 * the sha256 of its bytes. A copy whose path is a folder has one member per file of the package
 * (`MANIFEST.json` first); a copy whose path is a file (a package tar) is its own single member.
 */
export interface SourceMember extends FileIdentity {
  readonly name: string;
  readonly path: string;
  readonly sha256: string;
}

/** A package copy read from disk: its members and the package bytes they make. */
export interface PackageSource {
  readonly folder: boolean;
  readonly members: readonly (SourceMember & { readonly data: Buffer })[];
  /** The package as a deterministic tar (the bytes an archive stores). */
  readonly bytes: Buffer;
  readonly manifest: Manifest;
  /** sha256 of the source's own `MANIFEST.json` bytes (the folder's file, or the tar's first member). */
  readonly manifestSha256: string;
  /**
   * sha256 of the `MANIFEST.json` inside `bytes`, the one an archive of them holds. The folder's
   * own file, unless the copy was recorded with the checksum of opstate's regenerated form (see
   * `readPackageSource`); then that regenerated manifest, and the folder's file differs from it.
   */
  readonly packageManifestSha256: string;
}

function bad(message: string, copy: PhysicalCopyRecord): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details: { copyId: copy.id } });
}

/**
 * The manifest of an unpacked package folder, its member names checked: `BAD_INPUT` for one over
 * `MAX_MANIFEST_BYTES`, not JSON, without a list of members, or with an entry whose name is not a
 * plain file name (or is named twice) or that lacks a whole size or a sha256.
 */
export function parseManifest(data: Buffer, where: string): Manifest {
  const parsed = manifestJson(data, where);
  const members = (parsed as { members?: unknown } | null)?.members;
  if (!Array.isArray(members)) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, `${where}: ${MANIFEST_NAME} has no members`);
  }
  const names = new Set<string>();
  for (const m of members as { name?: unknown; size?: unknown; sha256?: unknown }[]) {
    const name = checkMemberName(m?.name, `${where} ${MANIFEST_NAME}`);
    if (name === MANIFEST_NAME || names.has(name)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `${where}: ${MANIFEST_NAME} names '${name}' twice`,
      );
    }
    names.add(name);
    if (!Number.isSafeInteger(m.size) || typeof m.sha256 !== 'string') {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `${where}: ${MANIFEST_NAME} entry '${name}' lacks a size or sha256`,
      );
    }
  }
  return parsed as Manifest;
}

/**
 * Reads a raw data package copy from disk, every file opened without following a symlink and
 * identified by its descriptor: an unpacked folder (`MANIFEST.json` plus the files it names, each
 * checked against it) or a package tar. A folder's package keeps its own `MANIFEST.json` bytes
 * (extra fields, compact JSON and all), so an archive of it gives that file back byte for byte;
 * only a copy recorded with the checksum of the manifest opstate regenerates is read in that
 * form. The package bytes are checked against the copy's checksum and size. A difference, a
 * symlink, a hostile member name: non-retryable `BAD_INPUT`.
 *
 * @example
 * ```ts
 * const { members, bytes } = await readPackageSource(copy);
 * ```
 */
export async function readPackageSource(copy: PhysicalCopyRecord): Promise<PackageSource> {
  if (copy.path === null) throw bad(`copy ${copy.id} has no path to read`, copy);
  const top = await lstat(copy.path);
  if (top.isSymbolicLink()) throw bad(`${copy.path} is a symlink; a copy is read as it is`, copy);
  let source: PackageSource;
  if (top.isDirectory()) {
    const head = await readNoFollow(join(copy.path, MANIFEST_NAME));
    const manifest = parseManifest(head.data, copy.path);
    const members = [
      {
        name: MANIFEST_NAME,
        path: join(copy.path, MANIFEST_NAME),
        ...head,
        sha256: sha256(head.data),
      },
    ];
    for (const m of manifest.members) {
      const path = join(copy.path, m.name);
      const read = await readNoFollow(path);
      const digest = sha256(read.data);
      if (digest !== m.sha256 || read.data.length !== m.size) {
        throw bad(
          `${path} differs from ${MANIFEST_NAME} (sha256 ${digest}, ${read.data.length} bytes; manifest ${m.sha256}, ${m.size} bytes)`,
          copy,
        );
      }
      members.push({ name: m.name, path, ...read, sha256: digest });
    }
    const files = members.slice(1).map((m) => ({ name: m.name, data: m.data }));
    const own = packageWithManifest(head.data, files);
    // A copy recorded with the checksum of the regenerated form (how folders were packaged
    // before their own manifest was kept) is read in that form; its MANIFEST.json is then not
    // what an archive of it holds, and no deletion removes it.
    const regenerated =
      copy.checksum !== null && copy.checksum !== checksumOf(sha256(own))
        ? writePackage(files)
        : undefined;
    const bytes =
      regenerated !== undefined && copy.checksum === checksumOf(sha256(regenerated))
        ? regenerated
        : own;
    source = {
      folder: true,
      members,
      bytes,
      manifest,
      manifestSha256: sha256(head.data),
      packageManifestSha256:
        bytes === own ? sha256(head.data) : sha256(manifestBytes(manifest.members)),
    };
  } else {
    const read = await readNoFollow(copy.path);
    const { manifest } = readPackage(read.data);
    const member = {
      name: basename(copy.path),
      path: copy.path,
      ...read,
      sha256: sha256(read.data),
    };
    const [head] = unpackTar(read.data);
    const headSha256 = sha256(head?.data ?? Buffer.alloc(0));
    source = {
      folder: false,
      members: [member],
      bytes: read.data,
      manifest,
      manifestSha256: headSha256,
      packageManifestSha256: headSha256,
    };
  }
  const digest = checksumOf(sha256(source.bytes));
  if (
    (copy.checksum !== null && copy.checksum !== digest) ||
    (copy.size !== null && copy.size !== source.bytes.length)
  ) {
    throw bad(
      `${copy.path} does not match its copy record (recorded ${copy.checksum}, ${copy.size} bytes; found ${digest}, ${source.bytes.length} bytes)`,
      copy,
    );
  }
  return source;
}
