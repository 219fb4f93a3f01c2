import { readdirSync, readFileSync } from 'node:fs';
import type postgres from 'postgres';

/** CPU seconds (user + system) of each process that `match`es, by pid, read from /proc. */
export function procCpuByPid(match: (pid: number, comm: string) => boolean): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (!match(Number(entry), comm)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      byPid.set(Number(entry), (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // the process ended meanwhile
    }
  }
  return byPid;
}

/** CPU seconds (user + system) of every process that `match`es, read from /proc. */
export function procCpuSeconds(match: (pid: number, comm: string) => boolean): number {
  let total = 0;
  for (const s of procCpuByPid(match).values()) total += s;
  return total;
}

/** CPU seconds spent so far by this process, each Postgres process, nats-server and some children. */
export interface CpuSample {
  node: number;
  /** By pid: the difference of two samples can be limited to the backends of one workload. */
  postgres: Map<number, number>;
  nats: number;
  children: number;
}

/**
 * Samples the CPU time of this process, every `postgres` and `nats-server` process, and the
 * given child processes. The difference of two samples is what a run cost (`cpuMsPer`).
 *
 * @example
 * ```ts
 * const before = cpuSample(); await run(); const after = cpuSample();
 * const { total } = cpuMsPer(before, after, n, await postgresPidsOf(admin, [database]));
 * ```
 */
export function cpuSample(childPids: readonly number[] = []): CpuSample {
  const self = process.cpuUsage();
  return {
    node: (self.user + self.system) / 1e6,
    postgres: procCpuByPid((_, comm) => comm === 'postgres'),
    nats: procCpuSeconds((_, comm) => comm === 'nats-server'),
    children: childPids.length === 0 ? 0 : procCpuSeconds((pid) => childPids.includes(pid)),
  };
}

/**
 * The Postgres processes a workload uses on a shared server: the client backends connected to
 * its databases (ask while it is still connected), plus the server's own background processes
 * (WAL writer, checkpointer, background writer: they work for every database, so they also carry
 * a little of other workloads). Other databases' backends — other tests on the same server — are
 * left out.
 *
 * @example
 * ```ts
 * const pids = await postgresPidsOf(admin, ['opstate_e2e_1234']);
 * ```
 */
export async function postgresPidsOf(
  admin: postgres.Sql,
  databases: readonly string[],
): Promise<Set<number>> {
  const rows = await admin.unsafe(
    `select pid from pg_stat_activity
     where datname = any($1::text[])
        or backend_type in ('walwriter', 'checkpointer', 'background writer')`,
    [databases as string[]],
  );
  return new Set(rows.map((r) => Number(r.pid)));
}

/**
 * CPU milliseconds per item between two samples, all processes together and by process. With
 * `postgresPids`, only those Postgres processes count (a backend that started during the run
 * counts in full); without, every Postgres process on the machine does.
 */
export function cpuMsPer(
  before: CpuSample,
  after: CpuSample,
  n: number,
  postgresPids?: ReadonlySet<number>,
) {
  const ms = (seconds: number) => Math.round((seconds / n) * 1e6) / 1e3;
  let pg = 0;
  for (const [pid, s] of after.postgres) {
    if (postgresPids !== undefined && !postgresPids.has(pid)) continue;
    pg += s - (before.postgres.get(pid) ?? 0);
  }
  const parts = {
    bench_process: ms(after.node - before.node),
    child_processes: ms(after.children - before.children),
    postgres: ms(pg),
    nats_server: ms(after.nats - before.nats),
  };
  return {
    total:
      Math.round(
        (parts.bench_process + parts.child_processes + parts.postgres + parts.nats_server) * 1e3,
      ) / 1e3,
    ...parts,
  };
}
