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

describe('npm run bench -- cluster, at a tiny size', () => {
  it('measures R1 on one server and R3 on three, interleaved, and leaves nothing behind', async () => {
    // The private servers' store folders go under a folder of this test's own.
    scratch = await mkdtemp(join(tmpdir(), 'opstate-cluster-bench-'));
    const adminUrl = await findAdminUrl();
    const { code, lines, stderr } = await runBench('cluster', {
      TMPDIR: scratch,
      OPSTATE_BENCH_ADMIN_URL: adminUrl,
      OPSTATE_BENCH_CLUSTER_OPS: '100',
      OPSTATE_BENCH_WARM_UP: '20',
      OPSTATE_BENCH_CLUSTER_PAIRS: '2',
    });
    expect(code, stderr).toBe(0);

    const rounds = lines.filter((l) => l.name === 'cluster_round');
    expect(rounds.map((r) => r.setup)).toEqual(['r1', 'r3', 'r3', 'r1']);
    for (const r of rounds) {
      const replicas = r.setup === 'r1' ? 1 : 3;
      // Read back from the servers, not the setting echoed.
      expect(r).toMatchObject({
        replicas_set: replicas,
        nats_servers: replicas,
        stream_replicas: replicas,
        stream_peers: replicas,
        heartbeat_bucket_replicas: replicas,
        operations: 100,
      });
      expect(r.nats_version).toMatch(/^\d+\.\d+\.\d+/);
      expect(r.value).toBeGreaterThan(0);
      const cpu = r.cpu_ms_per_op as Record<string, number>;
      expect(cpu.opstate).toBeGreaterThan(0);
      expect(cpu.postgres).toBeGreaterThan(0);
      // /proc counts in ticks of 10 ms: one server's share of 100 operations may round to none.
      expect(cpu.nats_servers).toBeGreaterThanOrEqual(0);
    }

    const [ops, cpu] = ['cluster_ops_per_s_r3_vs_r1', 'cluster_cpu_ms_per_op_r3_vs_r1'].map(
      (name) => lines.find((l) => l.name === name),
    );
    expect(ops?.replicas).toEqual({ r1: 1, r3: 3 });
    expect(ops?.ratio_per_pair).toHaveLength(2);
    // Three servers replicating every write: their CPU is read from their processes.
    expect((cpu?.r3 as Record<string, number> | undefined)?.nats_servers).toBeGreaterThan(0);
    for (const summary of [ops, cpu]) {
      expect(summary?.baseline).toBeGreaterThan(0);
      expect(summary?.ratio).toBeCloseTo((summary?.value ?? 0) / (summary?.baseline ?? 1), 1);
    }

    // Its databases are dropped and its servers' store folders removed.
    const databases = [...new Set(rounds.map((r) => String(r.database)))];
    expect(databases).toHaveLength(2);
    expect(await leftBehind(adminUrl, databases, scratch)).toEqual({ databases: [], files: [] });
  });
});
