import { describe, expect, it } from 'vitest';
import { shortId } from '../../machines/shortId.ts';
import { isUuid } from '../../persistence/subtypeFields.ts';
import { timeOrderedId } from '../../persistence/timeOrderedId.ts';
import { millisOf, TIME_ORDERED_ID } from '../helpers/timeOrderedIds.ts';

describe('timeOrderedId', () => {
  it('is a version-7 uuid of the RFC 9562 variant carrying its time in the first 48 bits', () => {
    const at = Date.UTC(2026, 11, 1, 15, 0, 0, 123);
    const id = timeOrderedId(at);
    expect(id).toMatch(TIME_ORDERED_ID);
    expect(isUuid(id)).toBe(true);
    expect(millisOf(id)).toBe(at);
    expect(millisOf(timeOrderedId(0))).toBe(0);
    expect(millisOf(timeOrderedId(2 ** 48 - 1))).toBe(2 ** 48 - 1);
  });

  it('sorts by time across milliseconds and never repeats within one (more ids than one draw of random bytes)', () => {
    const at = Date.UTC(2026, 11, 1);
    const same = Array.from({ length: 10_000 }, () => timeOrderedId(at));
    expect(new Set(same).size).toBe(same.length);
    expect(same.every((id) => millisOf(id) === at)).toBe(true);
    const later = Array.from({ length: 1_000 }, (_, i) => timeOrderedId(at + 1 + i));
    expect([...later].sort()).toEqual(later);
    expect(same.every((id) => id < (later[0] as string))).toBe(true);
  });

  it('refuses a time that is not whole milliseconds within 48 bits', () => {
    for (const bad of [-1, 1.5, 2 ** 48, Number.NaN]) {
      expect(() => timeOrderedId(bad)).toThrow(RangeError);
    }
  });
});

describe('shortId', () => {
  it('shows the random tail, so ids made in the same millisecond are told apart', () => {
    const at = Date.UTC(2026, 11, 1);
    const ids = Array.from({ length: 100 }, () => timeOrderedId(at));
    expect(new Set(ids.map((id) => id.slice(0, 8))).size).toBe(1);
    expect(new Set(ids.map(shortId)).size).toBe(ids.length);
    expect(shortId(ids[0] as string)).toBe((ids[0] as string).slice(-8));
  });
});
