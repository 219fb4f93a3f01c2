import { readdirSync, readFileSync } from 'node:fs';

/** CPU seconds (user + system) of every process that `match`es, read from /proc. */
export function procCpuSeconds(match: (pid: number, comm: string) => boolean): number {
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (!match(Number(entry), comm)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // the process ended meanwhile
    }
  }
  return ticks / 100;
}

/** CPU seconds spent so far by this process, Postgres, nats-server and some child processes. */
export interface CpuSample {
  node: number;
  postgres: number;
  nats: number;
  children: number;
}

/**
 * Samples the CPU time of this process, every `postgres` and `nats-server` process, and the
 * given child processes. The difference of two samples is what a run cost.
 *
 * @example
 * ```ts
 * const before = cpuSample(); await run(); const after = cpuSample();
 * const msPerOp = (after.postgres - before.postgres) * 1000 / n;
 * ```
 */
export function cpuSample(childPids: readonly number[] = []): CpuSample {
  const self = process.cpuUsage();
  return {
    node: (self.user + self.system) / 1e6,
    postgres: procCpuSeconds((_, comm) => comm === 'postgres'),
    nats: procCpuSeconds((_, comm) => comm === 'nats-server'),
    children: childPids.length === 0 ? 0 : procCpuSeconds((pid) => childPids.includes(pid)),
  };
}

/** CPU milliseconds per item between two samples, all processes together and by process. */
export function cpuMsPer(before: CpuSample, after: CpuSample, n: number) {
  const per = (k: keyof CpuSample) => Math.round(((after[k] - before[k]) / n) * 1e6) / 1e3;
  const parts = {
    bench_process: per('node'),
    child_processes: per('children'),
    postgres: per('postgres'),
    nats_server: per('nats'),
  };
  return {
    total: parts.bench_process + parts.child_processes + parts.postgres + parts.nats_server,
    ...parts,
  };
}
