import { describe, expect, it } from 'vitest';
import { createBatcher } from '../../loops/Batcher.ts';

describe('group-commit batcher', () => {
  it('flushes a lone call alone, and gathers calls made during a flush into the next one', async () => {
    const flushes: number[][] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const b = createBatcher(
      async (items: number[]) => {
        flushes.push(items);
        if (flushes.length === 1) await held;
        return items.map((i) => i * 10);
      },
      { max: 3 },
    );
    const first = b.submit(1);
    const rest = [2, 3, 4, 5].map((i) => b.submit(i));
    release();
    expect(await first).toBe(10);
    expect(await Promise.all(rest)).toEqual([20, 30, 40, 50]);
    expect(flushes).toEqual([[1], [2, 3, 4], [5]]);
  });

  it('rejects every call of a failed flush and keeps serving later ones', async () => {
    let fail = true;
    const b = createBatcher(
      async (items: string[]) => {
        if (fail) throw new Error('database went away');
        return items.map((s) => s.toUpperCase());
      },
      { max: 10 },
    );
    await expect(b.submit('a')).rejects.toThrow('database went away');
    fail = false;
    expect(await b.submit('b')).toBe('B');
  });
});
