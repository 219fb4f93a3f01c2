import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { checkMemberName } from './memberName.ts';

/** One file inside a tar archive. */
export interface TarMember {
  readonly name: string;
  readonly data: Uint8Array;
}

const BLOCK = 512;

function field(header: Buffer, offset: number, length: number, value: string): void {
  header.write(value, offset, length, 'ascii');
}

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function corrupt(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, `not a readable tar archive: ${message}`);
}

function checksumOf(header: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] as number);
  return sum;
}

/**
 * Writes a POSIX ustar archive (readable by `tar tvf`). Deterministic: mode 0644, owner 0, mtime
 * 0, members in the order given, so the same members always give the same bytes and a re-run of
 * a step produces an identical object.
 *
 * @example
 * ```ts
 * const tar = packTar([{ name: 'scan_0001.fits', data: bytes }]);
 * ```
 */
export function packTar(members: readonly TarMember[]): Buffer {
  const parts: Buffer[] = [];
  for (const m of members) {
    checkMemberName(m.name, 'tar');
    const header = Buffer.alloc(BLOCK);
    field(header, 0, 100, m.name);
    field(header, 100, 8, octal(0o644, 8));
    field(header, 108, 8, octal(0, 8));
    field(header, 116, 8, octal(0, 8));
    field(header, 124, 12, octal(m.data.length, 12));
    field(header, 136, 12, octal(0, 12));
    field(header, 156, 1, '0');
    field(header, 257, 6, 'ustar\0');
    field(header, 263, 2, '00');
    field(header, 148, 8, `${checksumOf(header).toString(8).padStart(6, '0')}\0 `);
    parts.push(header, Buffer.from(m.data));
    const pad = (BLOCK - (m.data.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(parts);
}

/**
 * Reads the regular-file members of a ustar archive written by `packTar`, checking every header
 * checksum and every member name (`checkMemberName`). A truncated or damaged archive, or one with a
 * hostile member name, is refused with `BAD_INPUT`.
 *
 * @example
 * ```ts
 * for (const m of unpackTar(await readFile(path))) console.log(m.name, m.data.length);
 * ```
 */
export function unpackTar(tar: Uint8Array): TarMember[] {
  const buf = Buffer.from(tar.buffer, tar.byteOffset, tar.byteLength);
  const members: TarMember[] = [];
  let offset = 0;
  for (;;) {
    if (offset + BLOCK > buf.length) throw corrupt('it ends before its end-of-archive blocks');
    const header = buf.subarray(offset, offset + BLOCK);
    if (header.every((b) => b === 0)) return members;
    const stored = Number.parseInt(header.toString('ascii', 148, 156).replace(/\0.*$/s, ''), 8);
    if (stored !== checksumOf(header)) throw corrupt(`header checksum mismatch at byte ${offset}`);
    const raw = header.subarray(0, 100);
    const end = raw.indexOf(0);
    const name = raw.toString('utf8', 0, end === -1 ? 100 : end);
    if (end !== -1 && raw.subarray(end).some((b) => b !== 0)) {
      throw corrupt(`a member name at byte ${offset} has bytes after a NUL`);
    }
    const size = Number.parseInt(header.toString('ascii', 124, 136).replace(/\0.*$/s, ''), 8);
    const start = offset + BLOCK;
    if (!Number.isSafeInteger(size) || start + size > buf.length) {
      throw corrupt(`member '${name}' runs past the end`);
    }
    if (header[156] === 0x30 || header[156] === 0) {
      checkMemberName(name, 'archive member');
      members.push({ name, data: buf.subarray(start, start + size) });
    }
    offset = start + Math.ceil(size / BLOCK) * BLOCK;
  }
}
