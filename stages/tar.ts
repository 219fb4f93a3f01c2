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
  return checksumsOf(header)[0];
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
    // UTF-8, as the reader decodes it (checkMemberName keeps it within 99 bytes).
    header.write(m.name, 0, 100, 'utf8');
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

/** Where a header's fields sit (POSIX ustar). */
const NAME = { at: 0, length: 100 } as const;
const MODE = { at: 100, length: 8 } as const;
const UID = { at: 108, length: 8 } as const;
const GID = { at: 116, length: 8 } as const;
const SIZE = { at: 124, length: 12 } as const;
const MTIME = { at: 136, length: 12 } as const;
const CHECKSUM = { at: 148, length: 8 } as const;
const TYPEFLAG = 156;
const MAGIC = { at: 257, length: 8 } as const;
const PREFIX = { at: 345, length: 155 } as const;
/** `ustar\0` + version `00` (POSIX), or `ustar  \0` (GNU). */
const MAGICS = ['ustar\u000000', 'ustar  \u0000'];

/**
 * A numeric header field: octal digits (after optional leading spaces, ended by NUL or space and
 * nothing but NULs and spaces after), or base-256 (first byte 0x80 for a positive value, 0xff for a
 * negative one, big-endian after it). Anything else, or a value past `Number.MAX_SAFE_INTEGER`, is
 * refused.
 */
function numeric(
  header: Uint8Array,
  f: { readonly at: number; readonly length: number },
  what: string,
  where: number,
): number {
  const bytes = header.subarray(f.at, f.at + f.length);
  const first = bytes[0] as number;
  if (first === 0x80 || first === 0xff) {
    let value = 0;
    for (let i = 1; i < bytes.length; i++) {
      value = value * 256 + (first === 0xff ? 0xff - (bytes[i] as number) : (bytes[i] as number));
      if (!Number.isSafeInteger(value)) throw corrupt(`the ${what} at byte ${where} is too large`);
    }
    return first === 0xff ? -(value + 1) : value;
  }
  let i = 0;
  while (i < bytes.length && bytes[i] === 0x20) i++;
  let value = 0;
  let digits = 0;
  for (; i < bytes.length; i++) {
    const b = bytes[i] as number;
    if (b < 0x30 || b > 0x37) break;
    value = value * 8 + (b - 0x30);
    digits++;
  }
  for (; i < bytes.length; i++) {
    if (bytes[i] !== 0 && bytes[i] !== 0x20) {
      throw corrupt(`the ${what} at byte ${where} is not an octal number`);
    }
  }
  if (digits === 0) throw corrupt(`the ${what} at byte ${where} is empty`);
  if (!Number.isSafeInteger(value)) throw corrupt(`the ${what} at byte ${where} is too large`);
  return value;
}

/** The sum of a header with its checksum field as spaces, unsigned and as signed bytes. */
function checksumsOf(header: Uint8Array): [number, number] {
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= CHECKSUM.at && i < CHECKSUM.at + CHECKSUM.length ? 0x20 : (header[i] as number);
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return [unsigned, signed];
}

/** A NUL-terminated text field; bytes after the NUL must be NULs too. */
function text(
  header: Uint8Array,
  f: { readonly at: number; readonly length: number },
  what: string,
  where: number,
): string {
  const raw = header.subarray(f.at, f.at + f.length);
  const end = raw.indexOf(0);
  if (end !== -1 && raw.subarray(end).some((b) => b !== 0)) {
    throw corrupt(`the ${what} at byte ${where} has bytes after a NUL`);
  }
  return Buffer.from(raw.buffer, raw.byteOffset, end === -1 ? raw.length : end).toString('utf8');
}

/** One header of an archive as read, with the data that follows it. */
export interface TarEntry {
  /** The byte offset of its header. */
  readonly offset: number;
  readonly name: string;
  /** The typeflag byte: `0x30` ('0') or `0` for a regular file. */
  readonly type: number;
  readonly data: Uint8Array;
}

/**
 * Walks an archive's headers, one entry per header, up to the first all-zero block. Total: every
 * header is checked before anything is taken from it — the checksum, the ustar magic, every numeric
 * field (octal or base-256), a size that is not negative and fits in the bytes left, a name within
 * its 100 bytes with nothing after its NUL, and no name prefix — and each entry moves the offset on
 * by at least one block, so any input, however crafted, ends in at most `length / 512` entries. A
 * damaged or truncated archive is refused with `BAD_INPUT`; nothing else is ever thrown.
 *
 * @example
 * ```ts
 * for (const e of readTarEntries(bytes)) console.log(e.offset, e.name, e.data.length);
 * ```
 */
export function* readTarEntries(tar: Uint8Array): Generator<TarEntry, void, undefined> {
  const buf = Buffer.from(tar.buffer, tar.byteOffset, tar.byteLength);
  let offset = 0;
  for (;;) {
    if (offset + BLOCK > buf.length) throw corrupt('it ends before its end-of-archive blocks');
    const header = buf.subarray(offset, offset + BLOCK);
    if (header.every((b) => b === 0)) return;
    const stored = numeric(header, CHECKSUM, 'header checksum', offset);
    if (!checksumsOf(header).includes(stored)) {
      throw corrupt(`header checksum mismatch at byte ${offset}`);
    }
    if (!MAGICS.includes(header.toString('latin1', MAGIC.at, MAGIC.at + MAGIC.length))) {
      throw corrupt(`the header at byte ${offset} is not a ustar header`);
    }
    const name = text(header, NAME, 'member name', offset);
    if (text(header, PREFIX, 'name prefix', offset) !== '') {
      throw corrupt(`member '${name}' at byte ${offset} has a name prefix (a path)`);
    }
    for (const [f, what] of [
      [MODE, 'mode'],
      [UID, 'owner id'],
      [GID, 'group id'],
      [MTIME, 'modification time'],
    ] as const) {
      numeric(header, f, what, offset);
    }
    const size = numeric(header, SIZE, 'size', offset);
    const start = offset + BLOCK;
    if (size < 0) throw corrupt(`member '${name}' at byte ${offset} has a negative size`);
    if (size > buf.length - start) throw corrupt(`member '${name}' runs past the end`);
    yield {
      offset,
      name,
      type: header[TYPEFLAG] as number,
      data: buf.subarray(start, start + size),
    };
    // At least one block on: the header's, then the member's data rounded up to whole blocks.
    offset = start + Math.ceil(size / BLOCK) * BLOCK;
  }
}

/**
 * Reads the regular-file members of a ustar archive written by `packTar` (`readTarEntries`, other
 * entry types skipped), checking every member name (`checkMemberName`). A truncated, damaged or
 * crafted archive, or one with a hostile member name, is refused with `BAD_INPUT`, in at most one
 * step per block of input.
 *
 * @example
 * ```ts
 * for (const m of unpackTar(await readFile(path))) console.log(m.name, m.data.length);
 * ```
 */
export function unpackTar(tar: Uint8Array): TarMember[] {
  const members: TarMember[] = [];
  for (const e of readTarEntries(tar)) {
    if (e.type === 0x30 || e.type === 0) {
      members.push({ name: checkMemberName(e.name, 'archive member'), data: e.data });
    }
  }
  return members;
}
