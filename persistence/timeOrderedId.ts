import { randomFillSync } from 'node:crypto';

/** Random bytes drawn 256 ids at a time: one call into the generator per 256 ids, not per id. */
const POOL_BYTES = 16 * 256;
let pool = Buffer.alloc(0);
let offset = POOL_BYTES;

/**
 * A new id, time-ordered: a version-7 UUID (RFC 9562) whose first 48 bits are `nowMs` (Unix
 * milliseconds) and whose other 74 free bits are random. Ids made later sort later (to the
 * millisecond), so the indexes keyed by them take each new row at their right edge instead of
 * on a random page: the pages a write touches stay few however many rows are stored. Valid
 * wherever a uuid is; the database's `opstate_uuid_v7()` makes the same kind for the rows it
 * keys itself.
 *
 * @example
 * ```ts
 * const id = timeOrderedId(clock.now()); // '019adb2e-6c1e-7f3a-9b2d-5e8f0a1c2d3e'
 * ```
 */
export function timeOrderedId(nowMs: number): string {
  if (!Number.isSafeInteger(nowMs) || nowMs < 0 || nowMs >= 2 ** 48) {
    throw new RangeError(`a time-ordered id needs a time in whole milliseconds; got ${nowMs}`);
  }
  if (offset >= POOL_BYTES) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES));
    offset = 0;
  }
  const b = pool.subarray(offset, offset + 16);
  offset += 16;
  b.writeUIntBE(nowMs, 0, 6);
  b[6] = ((b[6] as number) & 0x0f) | 0x70; // version 7
  b[8] = ((b[8] as number) & 0x3f) | 0x80; // the RFC 9562 variant
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
