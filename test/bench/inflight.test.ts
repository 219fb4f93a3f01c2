import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findAdminUrl } from '../helpers/postgres.ts';
import { leftBehind, runBench } from '../helpers/runBench.ts';

let scratch: string | undefined;
afterAll(async () => {
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
});

describe('npm run bench -- inflight, at tiny sizes', () => {
  it('holds each size in flight, prints its costs and their ratios, resets none, and leaves nothing behind', async () => {
    // The release files go under a folder of this test's own.
    scratch = await mkdtemp(join(tmpdir(), 'opstate-inflight-bench-'));
    const adminUrl = await findAdminUrl();
    const { code, lines, stderr } = await runBench('inflight', {
      TMPDIR: scratch,
      OPSTATE_BENCH_ADMIN_URL: adminUrl,
      OPSTATE_BENCH_INFLIGHT_SIZES: '40,80',
      OPSTATE_BENCH_INFLIGHT_HOLD_MS: '6000',
      // The reconciler's floor is 20 intervals (40 s): a dispatch still queued that long while
      // the workers' few free slots take turns over the queues would be reset.
      OPSTATE_BENCH_INFLIGHT_HEARTBEAT_MS: '2000',
      // Far under a queue's 1,000: one queue, so that a free slot never waits on the others.
      OPSTATE_BENCH_INFLIGHT_QUEUES: '1',
      OPSTATE_BENCH_INFLIGHT_PROBES: '2',
    });
    expect(code, stderr).toBe(0);

    const sizes = lines.filter((l) => l.name === 'inflight_size');
    expect(sizes.map((s) => s.value)).toEqual([40, 80]);
    for (const s of sizes) {
      expect(s).toMatchObject({ workers: 4, queues: 1, concurrency_per_worker: s.value / 4 });
      expect(s.resets).toBe(0);
      expect(s.left_hold).toBe(0);
      expect(s.reconciler_would_reset).toBe(0);
      expect(s.node).toBe(process.version);
      expect(s.loadavg).toHaveLength(3);
      // Every held operation is listed in its worker's heartbeat, and every worker beat.
      const beat = s.heartbeat as Record<string, number & number[]>;
      expect(beat.listed_per_worker).toEqual([1, 2, 3, 4].map(() => s.value / 4));
      expect(beat.puts).toBeGreaterThanOrEqual(4);
      expect(beat.bytes).toBeGreaterThan(0);
      const cpu = s.cpu_ms as { workers: number[]; plane: number };
      expect(cpu.workers).toHaveLength(4);
      expect(cpu.plane).toBeGreaterThanOrEqual(0);
      // The reconciler's pages hold every operation in flight.
      expect((s.reconciler_pass as Record<string, number>).rows).toBe(s.value);
      for (const v of Object.values(s.costs as Record<string, number>)) {
        expect(Number.isFinite(v)).toBe(true);
      }
    }

    const ratios = lines.filter((l) => l.name.endsWith('_ratio'));
    expect(ratios.map((r) => r.name)).toEqual(
      Object.keys(sizes[0]?.costs as object).map((k) => `inflight_${k}_ratio`),
    );
    for (const r of ratios) {
      expect(r).toMatchObject({ target: 1.2, sizes: { value: 80, baseline: 40 } });
      expect(typeof r.held).toBe('boolean');
    }

    // Its databases are dropped.
    const databases = sizes.map((s) => String(s.database));
    expect(await leftBehind(adminUrl, databases, scratch)).toEqual({ databases: [], files: [] });
  }, 600_000);
});
