import { describe, expect, it } from 'vitest';
import { crash, crashable, faultsOf, withFaults } from '../../loops/drill.ts';

describe('drill hooks', () => {
  it('fault points travel in options only through withFaults, and survive the spreads options go through', () => {
    const faults = { beforeStart: () => {} };
    const options = { kinds: ['transfer'], ...withFaults(faults) };
    expect(faultsOf(options)).toBe(faults);
    expect(faultsOf({ ...{ database: 1 }, ...options })).toBe(faults);
    expect(Object.keys(options)).toEqual(['kinds']);
    expect(withFaults(undefined)).toEqual({});
    // A plain `faults` property is not a fault point.
    expect(faultsOf({ faults })).toBeUndefined();
  });

  it('crash reaches only what was made crashable, and a spread copy is not', async () => {
    let crashed = 0;
    const worker = crashable({ id: 'w' }, async () => {
      crashed++;
    });
    expect(Object.keys(worker)).toEqual(['id']);
    await crash(worker);
    expect(crashed).toBe(1);
    await expect(crash({ ...worker })).rejects.toThrow(/not a worker or copy deleter/);
    await expect(crash({ id: 'w', crash: async () => {} })).rejects.toThrow(TypeError);
    expect(crashed).toBe(1);
  });
});
