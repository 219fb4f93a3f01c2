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
  /** sha256 of the package's own `MANIFEST.json` bytes. */
  readonly manifestSha256: string;
}

function bad(message: string, copy: PhysicalCopyRecord): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details: { copyId: copy.id } });
}

/** The manifest of an unpacked package folder, its member names checked. */
export function parseManifest(data: Buffer, where: string): Manifest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data.toString('utf8'));
  } catch {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, `${where}: ${MANIFEST_NAME} is not JSON`);
  }
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
 * checked against it) or a package tar. The package bytes are checked against the copy's
 * checksum and size. A difference, a symlink, a hostile member name: non-retryable `BAD_INPUT`.
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
    const bytes = writePackage(members.slice(1).map((m) => ({ name: m.name, data: m.data })));
    source = { folder: true, members, bytes, manifest, manifestSha256: sha256(head.data) };
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
    source = {
      folder: false,
      members: [member],
      bytes: read.data,
      manifest,
      manifestSha256: sha256(head?.data ?? Buffer.alloc(0)),
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
