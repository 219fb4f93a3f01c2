import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { findAdminUrl } from '../helpers/postgres.ts';
import { type BenchLine, runBench } from '../helpers/runBench.ts';

let scratch: string | undefined;
afterAll(async () => {
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
});

/** The bench's databases (`opstate_e2e_<run>` and its baseline's `…_raw`) on the server now. */
async function e2eDatabases(adminUrl: string): Promise<string[]> {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await admin`select datname from pg_database where datname like 'opstate_e2e_%'`;
    return rows.map((r) => String(r.datname));
  } finally {
    await admin.end({ timeout: 5 });
  }
}

function line(lines: readonly BenchLine[], name: string): BenchLine {
  const found = lines.find((l) => l.name === name);
  if (found === undefined) {
    throw new Error(`no line ${name} among ${lines.map((l) => l.name).join(', ')}`);
  }
  return found;
}

/** A ratio line's ratio is its value over its baseline, as printed (two decimals). */
function expectRatio(l: BenchLine): void {
  expect(l.baseline, l.name).toBeGreaterThan(0);
  expect(l.ratio, l.name).toBeCloseTo(l.value / (l.baseline as number), 1);
}

interface Relation {
  readonly relation: string;
  readonly bytes: number;
  readonly records: number;
}

describe('npm run bench -- e2e, at tiny sizes', () => {
  it('runs in process, a package per transfer and over a stored history, prints every figure against its baseline, and leaves nothing behind', async () => {
    scratch = await mkdtemp(join(tmpdir(), 'opstate-e2e-bench-'));
    const adminUrl = await findAdminUrl();
    const before = await e2eDatabases(adminUrl);
    const profile = join(scratch, 'run.cpuprofile');
    const { code, lines, stderr } = await runBench('e2e', {
      TMPDIR: scratch,
      OPSTATE_BENCH_ADMIN_URL: adminUrl,
      OPSTATE_BENCH_E2E_OPS: '200',
      OPSTATE_BENCH_WARM_UP: '20',
      OPSTATE_BENCH_STORED: '300',
      OPSTATE_BENCH_DISTINCT: '1',
      OPSTATE_BENCH_WORKER_PROCESSES: '0',
      OPSTATE_BENCH_TRICKLE: '0',
      OPSTATE_BENCH_MEMORY_ROWS: '0',
      // The raw commit rate each ratio divides by: measured briefly, seven times over.
      OPSTATE_BENCH_SECONDS: '0.3',
      OPSTATE_BENCH_WAL_BREAKDOWN: '1',
      OPSTATE_BENCH_CPU_PROFILE: profile,
    });
    expect(code, stderr).toBe(0);

    // The throughput of each run is divided by the raw commit rate measured around it.
    const raw = line(lines, 'raw_single_row_update');
    expect(raw.value).toBeGreaterThan(0);
    for (const run of ['in_process', 'in_process_distinct_outputs', 'in_process_stored_history']) {
      const ops = line(lines, `e2e_ops_per_s_${run}`);
      expect(ops.value).toBeGreaterThan(0);
      expectRatio(ops);

      // What Postgres wrote per operation, counted, and the same read back record by record. The
      // server's WAL counts every database's (the suite's other files write beside the bench),
      // so only the bench database's own relations are compared with the work: the operation
      // row is written once and changed three times (SCHEDULE, START, COMPLETE), and the four
      // transitions are rows of the history.
      const wal = line(lines, `e2e_wal_bytes_per_op_${run}`);
      const byRelation = line(lines, `e2e_wal_by_relation_${run}`);
      expect(wal.value).toBeGreaterThan(0);
      const relations = byRelation.relations as Relation[];
      const own = relations
        .filter((r) => r.relation.startsWith('opstate.'))
        .reduce((sum, r) => sum + r.bytes, 0);
      expect(own).toBeGreaterThan(0);
      expect(own).toBeLessThanOrEqual(byRelation.value);
      const operation = relations.find((r) => r.relation === 'opstate.operation');
      expect(operation?.records).toBeGreaterThanOrEqual(4);
      const history = relations.filter((r) =>
        /^opstate\.operation_transition_p\d+$/.test(r.relation),
      );
      expect(history.reduce((sum, r) => sum + r.records, 0)).toBeCloseTo(4, 1);

      const buffers = line(lines, `e2e_buffers_by_relation_${run}`);
      expect(buffers.value).toBeGreaterThan(0);

      const cpu = line(lines, `e2e_cpu_ms_per_op_${run}`);
      expect(cpu.bench_process).toBeGreaterThan(0);
      expect(cpu.postgres).toBeGreaterThan(0);
      expect(cpu.value).toBeGreaterThanOrEqual(cpu.bench_process as number);

      const shares = line(lines, `e2e_cpu_profile_shares_${run}`);
      expect(shares.value).toBeGreaterThan(0);
      const parts = shares.parts as { part: string; share: number }[];
      expect(parts.length).toBeGreaterThan(3);
      const sum = parts.reduce((s, p) => s + p.share, 0);
      expect(sum).toBeGreaterThan(0.95);
      expect(sum).toBeLessThan(1.05);
    }
    // The profile of the last run, as Chrome DevTools reads it.
    expect(existsSync(profile)).toBe(true);
    const written = JSON.parse(await readFile(profile, 'utf8')) as { nodes: unknown[] };
    expect(written.nodes.length).toBeGreaterThan(0);

    // The stored run against the run before it (a package per transfer), in the units the machine
    // moves least.
    for (const name of [
      'e2e_stored_history_ratio',
      'e2e_stored_history_ratio_per_raw',
      'e2e_stored_history_buffers_ratio',
      'e2e_stored_history_wal_ratio',
      'e2e_stored_history_cpu_ratio',
    ]) {
      expectRatio(line(lines, name));
    }
    // Its WAL figure is the stored run's own (printed whole there, rounded on the run's line).
    const walRatio = line(lines, 'e2e_stored_history_wal_ratio').value;
    const storedWal = line(lines, 'e2e_wal_bytes_per_op_in_process_stored_history').value;
    expect(Math.abs(walRatio - storedWal)).toBeLessThanOrEqual(1);

    // Every line is one JSON object with a name, a value and a unit.
    for (const l of lines) {
      expect(typeof l.name).toBe('string');
      expect(Number.isFinite(l.value), l.name).toBe(true);
      expect(typeof l.unit, l.name).toBe('string');
    }
    expect(await e2eDatabases(adminUrl)).toEqual(before);
  }, 600_000);
});
