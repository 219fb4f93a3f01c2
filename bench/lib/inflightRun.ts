/**
 * One size of the in-flight bench (bench/inflight.ts): a deployment of its own, N operations
 * brought IN_PROGRESS and held, what the hold costs, the recovery passes' cost, then release and
 * teardown.
 */
import { randomBytes } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { Subscription } from '@nats-io/transport-node';
import postgres from 'postgres';
import { readReconcilerResets, readUnlisted } from '../../control-plane/ControlPlane.ts';
import { staleSuspects } from '../../control-plane/planMonitorPass.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import type { Logger } from '../../observe/Logger.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import { DEFAULT_DATABASE_SCHEMA } from '../../persistence/databaseSchema.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import { workerHeartbeatKey } from '../../transport/HeartbeatKey.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { transportNames } from '../../transport/TransportNames.ts';
import { benchDatabases, benchLog } from './benchDatabases.ts';
import { type Child, spawnCli, stopChild, waitForOutput } from './children.ts';
import { postgresPidsOf, procCpuByPid, procCpuSeconds } from './cpu.ts';
import { NATS_URL } from './settings.ts';
import { instrument, newCounter, type StatementCounter } from './statementCounter.ts';

/** What one of the two recovery passes cost: the median of each figure over the probes. */
export interface PassCost {
  readonly probes: number;
  readonly wallMs: number;
  /** This process's CPU time (user + system) while the pass ran. */
  readonly cpuMs: number;
  /** Statements sent to Postgres (a transaction's BEGIN and COMMIT included). */
  readonly statements: number;
  /** Heartbeat bytes read: the bucket's values, times the `heartbeats.list()` calls. */
  readonly kvBytesRead: number;
  /** Operations the pass's pages held. */
  readonly rows: number;
}

/** What one size measured. */
export interface Held {
  readonly n: number;
  readonly database: string;
  readonly holdMs: number;
  /** Heartbeat intervals in the hold window. */
  readonly intervals: number;
  /** From the first submission to all N IN_PROGRESS. */
  readonly upS: number;
  readonly cpuMs: {
    readonly perWorker: number[];
    readonly workers: number;
    readonly plane: number;
    readonly postgres: number;
    readonly nats: number;
  };
  readonly heartbeat: {
    readonly puts: number;
    readonly bytes: number;
    readonly bytes_per_interval: number;
    readonly value_bytes_per_worker: number[];
    readonly listed_per_worker: number[];
  };
  readonly monitor: PassCost;
  readonly reconciler: PassCost;
  /** RESET transitions from the first submission to the last completion. */
  readonly resets: number;
  /** Operations no longer IN_PROGRESS at the hold window's end (before the release). */
  readonly leftHold: number;
  /** Resets the passes run here planned (each probe's plan, the most of them). */
  readonly wouldReset: number;
  /** The longest an operation's first attempt waited SCHEDULED for a slot, in seconds. */
  readonly longestScheduledS: number;
  /**
   * The control plane's reconciler passes that left dispatches waiting in their queues past the
   * floor, and the most it left in one pass.
   */
  readonly spared: { readonly passes: number; readonly most: number };
}

/** One size's settings: how many to hold, on what, for how long, and how to let them go. */
export interface HoldOptions {
  readonly n: number;
  readonly workers: number;
  /**
   * Queues the operations are spread over, round robin: a queue's consumer hands out at most
   * `maxAckPending` (1,000) dispatches not yet acknowledged, and a held operation's is not.
   */
  readonly queues: number;
  /** The compiled handlers module the workers load. */
  readonly handlers: string;
  readonly releaseFile: string;
  readonly holdMs: number;
  readonly intervalMs: number;
  readonly probes: number;
  /** How long all N may take to come up, and to complete. */
  readonly upMs: number;
  readonly say: (line: string) => void;
  readonly release: () => Promise<void>;
}

/** The runtime's timers, all derived from the heartbeat interval. */
function timingOf(intervalMs: number): Partial<RuntimeTiming> {
  return {
    heartbeatIntervalMs: intervalMs,
    heartbeatTimeoutMs: 10 * intervalMs,
    reconcilerFloorMs: 20 * intervalMs,
    ackWaitMs: 40 * intervalMs,
    monitorIntervalMs: intervalMs,
    reconcilerIntervalMs: 3 * intervalMs,
  };
}

/** A size's deployment: database, runtime (no control plane), the heartbeat bucket's puts. */
interface Deployment {
  readonly runtime: Runtime;
  readonly sql: postgres.Sql;
  readonly admin: postgres.Sql;
  readonly database: string;
  readonly env: Record<string, string>;
  readonly bucket: string;
  readonly counter: StatementCounter;
  readonly puts: { counting: boolean; msgs: number; bytes: number };
  readonly children: Child[];
  close(): Promise<void>;
}

/**
 * A database and a NATS prefix of their own, a runtime on them (no control plane) whose statements
 * are counted, and a subscription counting the heartbeat bucket's puts; `close` undoes it all.
 */
async function openDeployment(o: HoldOptions): Promise<Deployment> {
  const dbs = benchDatabases();
  const database = `opstate_bench_inflight_${randomBytes(4).toString('hex')}`;
  const url = await dbs.create(database);
  const prefix = `bench_inflight_${randomBytes(4).toString('hex')}`;
  const timing = timingOf(o.intervalMs);
  const { quietLogger } = benchLog('inflight');
  // The runtime says once that its NATS takes anonymous clients: meant here (bench/lib/settings.ts).
  const logger: Logger = {
    log: (level, message, fields) =>
      message.includes('without credentials') ? undefined : quietLogger.log(level, message, fields),
  };
  const children: Child[] = [];
  const opened: { runtime?: Runtime; sub?: Subscription; sql?: postgres.Sql } = {};
  const close = async () => {
    await Promise.all(children.map((c) => stopChild(c)));
    opened.sub?.unsubscribe();
    await (opened.runtime?.transport as JetStreamTransport | undefined)
      ?.destroy()
      .catch(() => undefined);
    await opened.runtime?.close().catch(() => undefined);
    await opened.sql?.end({ timeout: 5 });
    await dbs.dropAll();
  };
  try {
    opened.runtime = await createRuntime({
      databaseUrl: url,
      natsUrl: NATS_URL,
      prefix,
      timing,
      logger,
    });
    opened.sql = postgres(url, {
      max: 2,
      onnotice: () => {},
      connection: { search_path: DEFAULT_DATABASE_SCHEMA },
    });
    const bucket = transportNames(prefix).heartbeatBucket;
    const puts = { counting: false, msgs: 0, bytes: 0 };
    const connection = (opened.runtime.transport as JetStreamTransport).connection;
    opened.sub = connection.subscribe(`$KV.${bucket}.>`, {
      callback: (_err, msg) => {
        if (!puts.counting) return;
        puts.msgs++;
        puts.bytes += msg.data.length;
      },
    });
    const counter = newCounter();
    instrument(opened.runtime.database, counter);
    const env = {
      DATABASE_URL: url,
      NATS_URL,
      OPSTATE_PREFIX: prefix,
      OPSTATE_TIMING: JSON.stringify(timing),
      BENCH_RELEASE_FILE: o.releaseFile,
    };
    const { runtime, sql } = opened;
    return {
      runtime,
      sql,
      admin: dbs.admin,
      database,
      env,
      bucket,
      counter,
      puts,
      children,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The transfers the operations are, one per queue: the one package, from the source to each of
 * `queues` buffer locations (a transfer routes on its destination: one queue each).
 */
async function transfersOf(runtime: Runtime, queues: number): Promise<CreateOperationInput[]> {
  const loc = (name: string, locationType: LocationType) =>
    runtime.artifacts.addLocation({ site: 'bench', name, locationType, storageRoot: `/${name}` });
  const source = await loc('source', LocationType.SOURCE);
  const dtp = await runtime.artifacts.addDataTransferPackage({ name: 'dtp-inflight' });
  const inputs: CreateOperationInput[] = [];
  for (let q = 1; q <= queues; q++) {
    const buffer = await loc(`buffer-${q}`, LocationType.BUFFER);
    inputs.push({
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: dtp,
        sourceLocationId: source.id,
        destinationLocationId: buffer.id,
      },
    });
  }
  return inputs;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Operations by status in the deployment's database. */
async function statuses(sql: postgres.Sql): Promise<Record<string, number>> {
  const rows = await sql`select status, count(*)::int as n from operation group by status`;
  return Object.fromEntries(rows.map((r) => [String(r.status), Number(r.n)]));
}

/**
 * Polls until `n` operations are `status`; says the counts every 30 s; throws after `ms`, or at
 * once when an operation was reset or an opstate process exited.
 */
async function untilAll(
  d: Deployment,
  status: string,
  n: number,
  ms: number,
  say: (line: string) => void,
): Promise<void> {
  const started = Date.now();
  let told = started;
  for (;;) {
    const now = await statuses(d.sql);
    if ((now[status] ?? 0) >= n) return;
    // A reset on the way is the run's failure already: said at once, not after `ms`.
    const [reset] = await d.sql`
      select to_status, by, reason from operation_transition where event = 'RESET' limit 1`;
    if (reset !== undefined) {
      throw new Error(`an operation was reset waiting for ${status}: ${JSON.stringify(reset)}`);
    }
    const exited = d.children.find((c) => c.proc.exitCode !== null || c.proc.signalCode !== null);
    if (exited !== undefined) {
      throw new Error(`an opstate process exited: ${exited.output.slice(-20).join('\n')}`);
    }
    if (Date.now() - started > ms) {
      throw new Error(`not all ${n} ${status} after ${ms / 1000} s: ${JSON.stringify(now)}`);
    }
    if (Date.now() - told >= 30_000) {
      told = Date.now();
      say(`waiting for ${n} ${status}: ${JSON.stringify(now)}`);
    }
    await sleep(500);
  }
}

/** Starts the control plane and the workers, and waits until each says it started. */
async function startProcesses(d: Deployment, o: HoldOptions): Promise<Child[]> {
  const plane = spawnCli(['control-plane'], d.env);
  d.children.push(plane);
  const workers: Child[] = [];
  for (let i = 1; i <= o.workers; i++) {
    const args = ['worker', '--kinds', OperationKind.TRANSFER, '--handlers', o.handlers];
    args.push('--concurrency', String(Math.ceil(o.n / o.workers)), '--id', `inflight-${i}`);
    const w = spawnCli(args, d.env);
    d.children.push(w);
    workers.push(w);
  }
  await waitForOutput(plane, 'control plane started', 120_000);
  for (const w of workers) await waitForOutput(w, 'started for', 120_000);
  return [plane, ...workers];
}

/** The heartbeat values' sizes and how many operations each lists, worker by worker. */
async function heartbeatValues(d: Deployment, workers: number) {
  const nc = (d.runtime.transport as JetStreamTransport).connection;
  const kv = await new Kvm(jetstream(nc)).open(d.bucket);
  const bytes: number[] = [];
  for (let i = 1; i <= workers; i++) {
    const entry = await kv.get(workerHeartbeatKey(`inflight-${i}`));
    bytes.push(entry?.operation === 'PUT' ? entry.value.length : 0);
  }
  const beats = await d.runtime.transport.heartbeats.list();
  const listed = Array.from(
    { length: workers },
    (_, i) => beats.find((b) => b.workerId === `inflight-${i + 1}`)?.held.length ?? 0,
  );
  return { bytes, listed };
}

/** CPU seconds so far of the given pids, of the size's Postgres backends and of nats-server. */
function cpuNow(pids: readonly number[], pg: ReadonlySet<number>) {
  const of = procCpuByPid((pid) => pids.includes(pid));
  return {
    each: pids.map((p) => of.get(p) ?? 0),
    postgres: procCpuSeconds((pid, comm) => comm === 'postgres' && pg.has(pid)),
    nats: procCpuByPid((_, comm) => comm === 'nats-server'),
  };
}

/** CPU seconds between two samples of the processes in both (a server that came or went is left out). */
function natsDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, s] of after) {
    const was = before.get(pid);
    if (was !== undefined) total += s - was;
  }
  return total;
}

/** The hold window: CPU and heartbeat puts from its start to its end. */
async function measureHold(d: Deployment, o: HoldOptions, processes: readonly Child[]) {
  const pids = processes.map((c) => c.proc.pid ?? -1);
  const pg = await postgresPidsOf(d.admin, [d.database]);
  const before = cpuNow(pids, pg);
  d.puts.counting = true;
  const t0 = performance.now();
  await sleep(o.holdMs);
  const holdMs = performance.now() - t0;
  d.puts.counting = false;
  const after = cpuNow(pids, pg);
  const ms = (s: number) => Math.round(s * 1e4) / 10;
  const each = after.each.map((a, i) => ms(a - (before.each[i] ?? 0)));
  const intervals = holdMs / o.intervalMs;
  return {
    holdMs,
    intervals,
    cpuMs: {
      plane: each[0] ?? 0,
      perWorker: each.slice(1),
      workers: ms(
        after.each.slice(1).reduce((a, b) => a + b, 0) -
          before.each.slice(1).reduce((a, b) => a + b, 0),
      ),
      postgres: ms(after.postgres - before.postgres),
      nats: ms(natsDelta(before.nats, after.nats)),
    },
    puts: { msgs: d.puts.msgs, bytes: d.puts.bytes },
  };
}

/** One pass as the control plane runs it, minus its writes: what it read and would reset. */
type PassRun = () => Promise<{ lists: number; rows: number; wouldReset: number }>;

/** The heartbeat monitor's reads and planning (`monitorLoop`, `strandedPass`), its writes left out. */
function monitorPass(d: Deployment): PassRun {
  const { store, transport } = d.runtime;
  const timeoutMs = transport.timing.heartbeatTimeoutMs;
  return async () => {
    const now = Date.now();
    const beats = await transport.heartbeats.list();
    const suspects = staleSuspects(beats, now, timeoutMs);
    if (suspects.length > 0) await store.loadMany(suspects);
    const { waiting, rows } = await readUnlisted(store, transport.timing, beats, now);
    return { lists: 1, rows, wouldReset: suspects.length + waiting.length };
  };
}

/**
 * The reconciler's reads and planning (`readReconcilerResets`), its writes left out, over every
 * operation in flight (not only those past the floor).
 */
function reconcilerPass(d: Deployment): PassRun {
  const { store, transport } = d.runtime;
  return async () => {
    const now = Date.now();
    const r = await readReconcilerResets(store, transport, now, new Date(now));
    return { lists: r.lists, rows: r.rows, wouldReset: r.resets.length };
  };
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

/** Runs a pass `probes` times; the median of each figure, and the most it would reset. */
async function probe(d: Deployment, pass: PassRun, probes: number, valueBytes: number) {
  const runs: (Omit<PassCost, 'probes'> & { wouldReset: number })[] = [];
  for (let i = 0; i < probes; i++) {
    const statements = d.counter.statements;
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    const r = await pass();
    const wallMs = performance.now() - t0;
    const used = process.cpuUsage(cpu);
    runs.push({
      wallMs,
      cpuMs: (used.user + used.system) / 1000,
      statements: d.counter.statements - statements,
      kvBytesRead: r.lists * valueBytes,
      rows: r.rows,
      wouldReset: r.wouldReset,
    });
  }
  const m = (k: keyof Omit<PassCost, 'probes'>) =>
    Math.round(median(runs.map((r) => r[k])) * 1000) / 1000;
  const cost: PassCost = {
    probes,
    wallMs: m('wallMs'),
    cpuMs: m('cpuMs'),
    statements: m('statements'),
    kvBytesRead: m('kvBytesRead'),
    rows: m('rows'),
  };
  return { cost, wouldReset: Math.max(0, ...runs.map((r) => r.wouldReset)) };
}

/** RESET transitions in the deployment's database. */
/** The longest wait, SCHEDULE to START, of any operation's first attempt, in seconds. */
async function longestScheduled(sql: postgres.Sql): Promise<number> {
  const [row] = await sql`
    select coalesce(extract(epoch from max(st.at - sc.at)), 0)::float8 as s
      from operation_transition sc
      join operation_transition st on st.operation_id = sc.operation_id
       and st.event = 'START' and st.attempt = 1
     where sc.event = 'SCHEDULE' and sc.attempt = 1`;
  return Math.round(Number(row?.s ?? 0) * 1000) / 1000;
}

/** What the control plane said of dispatches it left waiting in their queues. */
function sparedBy(plane: Child): { passes: number; most: number } {
  const lines = plane.output.filter((l) => l.includes('reconciler left dispatches waiting'));
  const counts = lines.map((l) =>
    Number(/"count":(\d+)|count=(\d+)/.exec(l)?.slice(1).find(Boolean) ?? 0),
  );
  return { passes: lines.length, most: Math.max(0, ...counts) };
}

async function resetCount(sql: postgres.Sql): Promise<number> {
  const [row] =
    await sql`select count(*)::int as n from operation_transition where event = 'RESET'`;
  return Number(row?.n ?? 0);
}

/**
 * One size, from a fresh database and NATS prefix to their removal: N operations submitted and
 * brought IN_PROGRESS by `workers` worker processes, held for `holdMs` while measured, the
 * recovery passes run `probes` times each, then released, completed and torn down (also when it
 * fails).
 *
 * @example
 * ```ts
 * const held = await holdAll({ n: 1000, workers: 4, queues: 16, handlers, releaseFile, holdMs: 120_000,
 *   intervalMs: 5000, probes: 5, upMs: 900_000, say, release });
 * ```
 */
export async function holdAll(o: HoldOptions): Promise<Held> {
  const d = await openDeployment(o);
  try {
    const inputs = await transfersOf(d.runtime, o.queues);
    const processes = await startProcesses(d, o);
    const started = Date.now();
    for (let i = 0; i < o.n; i += 500) {
      const batch = Array.from({ length: Math.min(500, o.n - i) }, (_, j) => i + j);
      await d.runtime.store.createMany(
        batch.map((k) => inputs[k % inputs.length] as CreateOperationInput),
      );
    }
    await untilAll(d, 'IN_PROGRESS', o.n, o.upMs, o.say);
    const upS = (Date.now() - started) / 1000;
    o.say(`${o.n} IN_PROGRESS after ${upS} s; holding for ${o.holdMs / 1000} s`);
    const hold = await measureHold(d, o, processes);
    const values = await heartbeatValues(d, o.workers);
    const valueBytes = values.bytes.reduce((a, b) => a + b, 0);
    const monitor = await probe(d, monitorPass(d), o.probes, valueBytes);
    const reconciler = await probe(d, reconcilerPass(d), o.probes, valueBytes);
    const stillHeld = (await statuses(d.sql)).IN_PROGRESS ?? 0;
    await o.release();
    await untilAll(d, 'COMPLETED', o.n, o.upMs, o.say);
    const resets = await resetCount(d.sql);
    const longestScheduledS = await longestScheduled(d.sql);
    const spared = sparedBy(processes[0] as Child);
    return {
      n: o.n,
      database: d.database,
      holdMs: Math.round(hold.holdMs),
      intervals: hold.intervals,
      upS,
      cpuMs: hold.cpuMs,
      heartbeat: {
        puts: hold.puts.msgs,
        bytes: hold.puts.bytes,
        bytes_per_interval: Math.round(hold.puts.bytes / hold.intervals),
        value_bytes_per_worker: values.bytes,
        listed_per_worker: values.listed,
      },
      monitor: monitor.cost,
      reconciler: reconciler.cost,
      resets,
      leftHold: o.n - stillHeld,
      wouldReset: monitor.wouldReset + reconciler.wouldReset,
      longestScheduledS,
      spared,
    };
  } finally {
    await d.close();
  }
}
