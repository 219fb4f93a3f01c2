/**
 * What holding long-running operations IN_PROGRESS costs, per operation held, at each size: N
 * operations held by four `opstate worker` processes (concurrency N/4 each, a handler that waits
 * until a file appears), spread over 16 queues (TRANSFERs to 16 buffer locations: a queue's
 * consumer hands out at most 1,000 dispatches not yet acknowledged), a control plane as an `opstate control-plane` process, on the real
 * Postgres and the real NATS JetStream, each size with a database and a NATS prefix of its own.
 * Once all N are IN_PROGRESS they are held for the hold window, during which this process only
 * watches:
 * - CPU of each worker process, of the control-plane process, of the Postgres backends of the
 *   size's database (with the server's WAL writer, checkpointer and background writer) and of the
 *   nats-server (shared with whatever else runs on it), read from /proc at the window's ends;
 * - heartbeat bytes written: every put to the heartbeat bucket, counted by a plain subscription to
 *   the bucket's subjects (`$KV.<bucket>.>`: the bytes of each value the server stored), which
 *   is the NATS KV write traffic; the nats-server here serves no monitoring endpoint (/varz), so
 *   the KV reads are counted as the passes below make them, not at the server;
 * - RESET transitions, and every operation still IN_PROGRESS at the window's end.
 * After the window, with all N still held, the two recovery passes whose cost follows the number
 * in flight are run here `OPSTATE_BENCH_INFLIGHT_PROBES` times each, as the control plane runs
 * them (the same reads, in the same order, and the same pure planning, none of its writes):
 * - the heartbeat monitor's pass: `heartbeats.list()`, `staleSuspects`, and the stranded look's
 *   pages of SCHEDULED operations (`activePages`, `unlistedScheduled`);
 * - the reconciler's pass: every page of the operations in flight (`activePages`, all of them:
 *   before now, not only those past the floor), then the heartbeats once, and
 *   `planReconcilerResets`, whose planned resets must be none;
 * each with its wall time, this process's CPU time, the statements it sent, and the heartbeat
 * bytes it read (the bucket's values times the `list()` calls). Then the file appears, all N
 * complete, and everything is stopped and dropped.
 *
 * Prints one `inflight_size` line per size and round, then one ratio line per cost: the cost per
 * operation in flight at the largest size ÷ at the smallest (target ≤ 1.2). Exits non-zero when
 * any operation was reset or any reconciler pass would have reset one.
 *
 *   npm run bench -- inflight
 *
 * Env: OPSTATE_BENCH_INFLIGHT_SIZES (default 1000,10000), OPSTATE_BENCH_INFLIGHT_ROUNDS (default 1;
 * the sizes in turn, reversed every other round), OPSTATE_BENCH_INFLIGHT_HOLD_MS (default 120000),
 * OPSTATE_BENCH_INFLIGHT_HEARTBEAT_MS (the heartbeat interval, default 5000: the monitor runs at
 * it, the timeout is 10 of them, the reconciler floor 20 and its interval 3),
 * OPSTATE_BENCH_INFLIGHT_PROBES (default 5), OPSTATE_BENCH_INFLIGHT_UP_MS (how long all N may take
 * to be IN_PROGRESS, or to complete, default 600000), OPSTATE_BENCH_INFLIGHT_QUEUES
 * (the queues the operations are spread over, default 16), OPSTATE_BENCH_ADMIN_URL.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { handlersModule, prepareBuiltProcesses } from '../test/helpers/opstateCli.ts';
import { print } from './lib/figure.ts';
import { type Held, holdAll, type PassCost } from './lib/inflightRun.ts';
import { envNumber } from './lib/settings.ts';

const SIZES = (process.env.OPSTATE_BENCH_INFLIGHT_SIZES ?? '1000,10000')
  .split(',')
  .map((s) => Number(s.trim()));
const ROUNDS = envNumber('OPSTATE_BENCH_INFLIGHT_ROUNDS', 1);
const HOLD_MS = envNumber('OPSTATE_BENCH_INFLIGHT_HOLD_MS', 120_000);
const INTERVAL_MS = envNumber('OPSTATE_BENCH_INFLIGHT_HEARTBEAT_MS', 5_000);
const PROBES = envNumber('OPSTATE_BENCH_INFLIGHT_PROBES', 5);
const UP_MS = envNumber('OPSTATE_BENCH_INFLIGHT_UP_MS', 600_000);
const WORKERS = 4;
// A queue's consumer hands out at most 1,000 dispatches not yet acknowledged (the transport's
// maxAckPending), and a held operation's is not: one queue would hold no more than 1,000 in flight.
const QUEUES = envNumber('OPSTATE_BENCH_INFLIGHT_QUEUES', 16);

const say = (line: string) => process.stderr.write(`[inflight] ${line}\n`);
const machine = () => ({
  node: process.version,
  loadavg: loadavg().map((l) => Math.round(l * 100) / 100),
});

/** The costs compared across sizes: per operation in flight (per heartbeat interval where timed). */
function costsOf(h: Held): Record<string, number> {
  const perOpInterval = (x: number) => x / h.n / h.intervals;
  const perOp = (p: PassCost, k: keyof PassCost) => p[k] / h.n;
  return {
    worker_cpu_us_per_op_per_interval: perOpInterval(h.cpuMs.workers * 1000),
    plane_cpu_us_per_op_per_interval: perOpInterval(h.cpuMs.plane * 1000),
    postgres_cpu_us_per_op_per_interval: perOpInterval(h.cpuMs.postgres * 1000),
    heartbeat_bytes_per_op_per_interval: perOpInterval(h.heartbeat.bytes),
    monitor_pass_us_per_op: perOp(h.monitor, 'wallMs') * 1000,
    monitor_pass_cpu_us_per_op: perOp(h.monitor, 'cpuMs') * 1000,
    monitor_pass_kv_bytes_read_per_op: perOp(h.monitor, 'kvBytesRead'),
    reconciler_pass_us_per_op: perOp(h.reconciler, 'wallMs') * 1000,
    reconciler_pass_cpu_us_per_op: perOp(h.reconciler, 'cpuMs') * 1000,
    reconciler_pass_statements_per_1000_ops: perOp(h.reconciler, 'statements') * 1000,
    reconciler_pass_kv_bytes_read_per_op: perOp(h.reconciler, 'kvBytesRead'),
  };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** One size's line: what was measured and the costs per operation in flight. */
function printSize(h: Held, round: number): void {
  const costs = Object.fromEntries(Object.entries(costsOf(h)).map(([k, v]) => [k, round3(v)]));
  print({
    name: 'inflight_size',
    value: h.n,
    unit: 'operations in flight',
    round,
    workers: WORKERS,
    queues: QUEUES,
    concurrency_per_worker: h.n / WORKERS,
    hold_s: h.holdMs / 1000,
    heartbeat_interval_ms: INTERVAL_MS,
    intervals: round3(h.intervals),
    up_s: h.upS,
    database: h.database,
    ...machine(),
    cpu_ms: {
      workers: h.cpuMs.perWorker,
      plane: h.cpuMs.plane,
      postgres: h.cpuMs.postgres,
      nats_server_shared: h.cpuMs.nats,
    },
    heartbeat: h.heartbeat,
    monitor_pass: h.monitor,
    reconciler_pass: h.reconciler,
    resets: h.resets,
    left_hold: h.leftHold,
    reconciler_would_reset: h.wouldReset,
    longest_scheduled_s: h.longestScheduledS,
    reconciler_left_waiting: h.spared,
    costs,
    note: `control plane and ${WORKERS} workers as opstate processes; CPU and heartbeat puts over the hold window; passes run here ${PROBES} times each after it, the median of each figure`,
  });
}

/** One line per cost: at the largest size ÷ at the smallest, per operation in flight. */
function printRatios(held: readonly Held[]): void {
  const sizes = [...new Set(held.map((h) => h.n))].sort((a, b) => a - b);
  if (sizes.length < 2) return;
  const small = sizes[0] as number;
  const large = sizes.at(-1) as number;
  const mean = (n: number, k: string) => {
    const at = held.filter((h) => h.n === n).map((h) => costsOf(h)[k] ?? 0);
    return at.reduce((a, b) => a + b, 0) / at.length;
  };
  for (const k of Object.keys(costsOf(held[0] as Held))) {
    const value = mean(large, k);
    const baseline = mean(small, k);
    const ratio = baseline === 0 ? (value === 0 ? 1 : Number.POSITIVE_INFINITY) : value / baseline;
    print({
      name: `inflight_${k}_ratio`,
      value: round3(value),
      unit: k,
      baseline: round3(baseline),
      sizes: { value: large, baseline: small },
      target: 1.2,
      held: ratio <= 1.2,
      ...machine(),
      note: `per operation in flight at ${large} ÷ at ${small}, mean over ${ROUNDS} round(s)`,
    });
  }
}

await prepareBuiltProcesses(say);
const handlers = handlersModule(new URL('./fixtures/signalHandlers.ts', import.meta.url));
const scratch = await mkdtemp(join(tmpdir(), 'opstate-inflight-'));
const held: Held[] = [];
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? SIZES : [...SIZES].reverse();
    for (const n of order) {
      const releaseFile = join(scratch, `release-${randomBytes(4).toString('hex')}`);
      say(`round ${round}: ${n} in flight`);
      const h = await holdAll({
        n,
        workers: WORKERS,
        queues: QUEUES,
        handlers,
        releaseFile,
        holdMs: HOLD_MS,
        intervalMs: INTERVAL_MS,
        probes: PROBES,
        upMs: UP_MS,
        say,
        release: () => writeFile(releaseFile, 'go'),
      });
      printSize(h, round);
      held.push(h);
    }
  }
  printRatios(held);
} finally {
  await rm(scratch, { recursive: true, force: true });
}
const failed = held.filter((h) => h.resets > 0 || h.leftHold > 0 || h.wouldReset > 0);
if (failed.length > 0) {
  say(`healthy operations reset at ${failed.map((h) => h.n).join(', ')} in flight`);
  process.exitCode = 1;
}
