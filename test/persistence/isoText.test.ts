import { describe, expect, it } from 'vitest';
import { isoText } from '../../persistence/isoText.ts';

describe('isoText', () => {
  it('is toISOString, for instants seen before and new ones alike', () => {
    const instants = Array.from(
      { length: 200 },
      (_, i) => new Date(1_764_532_453_130 + (i % 70) * 86_399_999),
    );
    for (const d of [...instants, ...instants]) expect(isoText(d)).toBe(d.toISOString());
    expect(isoText(new Date(-1))).toBe('1969-12-31T23:59:59.999Z');
  });

  it('throws on an invalid date, as toISOString does, every time', () => {
    expect(() => isoText(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => isoText(new Date(Number.NaN))).toThrow(RangeError);
  });
});
