/**
 * A three-node NATS JetStream cluster with three replicas (R3) against one server with one
 * replica (R1), in the same run: the same end-to-end workload through the real runtime — a
 * control plane and a worker, each a runtime of its own in this process as in the e2e bench's
 * in-process run — on the real Postgres, against each in turn, in interleaved rounds (R1, R3, then
 * R3, R1, …: a drift of the machine over the run falls on both alike). Prints one JSON line per
 * round (`cluster_round`) and the summary lines: ops/s and CPU per operation of R3 ÷ those of R1.
 *
 *   node --import tsx bench/cluster.ts
 *
 * Both sets of servers are private (`nats-server -js` on free loopback ports, each with a store
 * folder of its own, removed at the end), started and stopped by the bench; they take clients
 * without credentials, so the runtime is told that is meant (`insecureNats`). Each set has its
 * own database (created and dropped by the bench) and the replica count is set, not left to the
 * default (`OPSTATE_NATS_REPLICAS`); each round reads back the replica count of the dispatch
 * stream and of the heartbeat bucket, and how many of the stream's peers are current, and stops
 * the run when they are not what was set.
 *
 * CPU per operation counts this process (the control plane, the worker, the bench's own polling),
 * the Postgres backends of the round's database with the server's WAL writer, checkpointer and
 * background writer, and the round's own nats-server processes (only those: not the shared
 * server, not the other set). The servers of the idle set keep running meanwhile (the cluster's
 * Raft heartbeats cost it a little CPU, counted in neither round).
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (the Postgres, default postgres://postgres@127.0.0.1:5432/postgres),
 * OPSTATE_BENCH_CLUSTER_OPS (operations per round, default 5000), OPSTATE_BENCH_CLUSTER_PAIRS
 * (rounds of each, default 2), OPSTATE_BENCH_WARM_UP (operations through each round's worker
 * untimed first, default 5000, at most the round's), OPSTATE_BENCH_CONCURRENCY (worker
 * concurrency, default 256), OPSTATE_BENCH_CREATE_BATCH (createMany size, default 500).
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import postgres from 'postgres';
import { NatsClusterProcess, NatsServerProcess } from '../chaos/privateServers.ts';
import { ArtifactType } from '../machines/ArtifactType.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { DEFAULT_DATABASE_SCHEMA } from '../persistence/databaseSchema.ts';
import type { OutputCopy } from '../persistence/OutputCopy.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../runtime/Runtime.ts';
import { transportNames } from '../transport/TransportNames.ts';
import { postgresPidsOf, procCpuByPid } from './lib/cpu.ts';
import { print } from './lib/figure.ts';
import { ADMIN_URL, envNumber, WARM_UP as SHARED_WARM_UP } from './lib/settings.ts';

const OPS = envNumber('OPSTATE_BENCH_CLUSTER_OPS', 5000);
const PAIRS = envNumber('OPSTATE_BENCH_CLUSTER_PAIRS', 2);
const CONCURRENCY = envNumber('OPSTATE_BENCH_CONCURRENCY', 256);
const CREATE_BATCH = envNumber('OPSTATE_BENCH_CREATE_BATCH', 500);
const WARM_UP = Math.min(SHARED_WARM_UP, OPS);
const DONE_TIMEOUT_MS = 300_000;

/** Control-plane loops tuned for throughput, as in the e2e bench; the transport keeps its defaults. */
const TIMING: Partial<RuntimeTiming> = {
  schedulerIntervalMs: 10,
  relayIntervalMs: 10,
  leaderPollMs: 250,
};

const quietLogger: Logger = {
  log(level, message, fields) {
    if (level !== 'WARNING' && level !== 'ERROR') return;
    // Each runtime says once that its NATS takes anonymous clients: meant here, see above.
    if (message.includes('without credentials')) return;
    process.stderr.write(`[cluster] ${level} ${message} ${JSON.stringify(fields ?? {})}\n`);
  },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One of the two NATS setups measured: its servers, its database, and what it was set to keep. */
interface Target {
  readonly label: 'r1' | 'r3';
  readonly replicas: number;
  readonly natsUrl: string;
  /** The nats-server processes of this setup (read when a round starts: a node may restart). */
  readonly natsPids: () => number[];
  readonly database: string;
  readonly databaseUrl: string;
  readonly prefix: string;
  /** The transfer every operation is, and what its handler returns: made by the first round. */
  world?: World;
}

/** A transfer of the run's one package to the buffer, and the package's copy there. */
interface World {
  readonly input: CreateOperationInput;
  readonly produced: readonly OutputCopy[];
}

/** What one round measured. */
interface Round {
  readonly target: Target;
  readonly seconds: number;
  readonly cpu: { readonly opstate: number; readonly nats: number; readonly postgres: number };
}

/** What the round's servers say of themselves and of the stream and bucket the runtime made. */
interface Placement {
  readonly natsVersion: string;
  readonly streamReplicas: number;
  /** The stream's leader and followers. */
  readonly streamPeers: number;
  /** Of those, the leader and the followers that had caught up when asked. */
  readonly streamPeersCurrent: number;
  readonly heartbeatReplicas: number;
}

/**
 * The replica counts of the dispatch stream and the heartbeat bucket, as the servers report
 * them; throws when either is not what the target set, or fewer of the stream's peers are current.
 */
async function placementOf(target: Target): Promise<Placement> {
  const nc = await connect({ servers: target.natsUrl.split(','), name: 'bench-cluster-check' });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
    const names = transportNames(target.prefix);
    const stream = await jsm.streams.info(names.stream);
    const bucket = await jsm.streams.info(`KV_${names.heartbeatBucket}`);
    const followers = stream.cluster?.replicas ?? [];
    const placement: Placement = {
      natsVersion: nc.info?.version ?? 'unknown',
      streamReplicas: stream.config.num_replicas,
      streamPeers: 1 + followers.length,
      streamPeersCurrent: 1 + followers.filter((r) => r.current).length,
      heartbeatReplicas: bucket.config.num_replicas,
    };
    const wanted = target.replicas;
    if (
      placement.streamReplicas !== wanted ||
      placement.heartbeatReplicas !== wanted ||
      placement.streamPeers !== wanted
    ) {
      throw new Error(
        `${target.label}: the servers report ${JSON.stringify(placement)}, not ${wanted} replicas of ${names.stream} (with as many peers) and of its heartbeat bucket`,
      );
    }
    return placement;
  } finally {
    await nc.close();
  }
}

/** A runtime of the target's deployment, with the replica count set rather than defaulted. */
function openRuntime(target: Target): Promise<Runtime> {
  return createRuntime({
    databaseUrl: target.databaseUrl,
    natsUrl: target.natsUrl,
    insecureNats: true,
    prefix: target.prefix,
    timing: TIMING,
    logger: quietLogger,
    env: { ...process.env, OPSTATE_NATS_REPLICAS: String(target.replicas) },
  });
}

/** Starts the control plane in `plane` and waits until it leads. */
async function lead(plane: Runtime) {
  const started = plane.startControlPlane();
  const until = Date.now() + 60_000;
  while (!started.isLeader) {
    if (Date.now() > until) throw new Error('control plane never became leader');
    await sleep(20);
  }
  return started;
}

/** The transfer every operation of the target is: the one package, from the source to the buffer. */
async function worldOf(plane: Runtime, run: string): Promise<World> {
  const loc = (n: string, locationType: LocationType) =>
    plane.artifacts.addLocation({ site: 'bench', name: n, locationType, storageRoot: `/${n}` });
  const source = await loc('source', LocationType.SOURCE);
  const buffer = await loc('buffer', LocationType.BUFFER);
  const dtp = await plane.artifacts.addDataTransferPackage({ name: `dtp-${run}` });
  return {
    input: {
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: dtp,
        sourceLocationId: source.id,
        destinationLocationId: buffer.id,
      },
    },
    // The first completion creates the package's copy at the buffer, the others find it there.
    produced: [
      { artifactType: ArtifactType.DATA_TRANSFER_PACKAGE, artifactId: dtp, locationId: buffer.id },
    ],
  };
}

/**
 * Creates `n` copies of `input` (createMany batches) and waits until none of the database's
 * operations is active, then checks that all `n` COMPLETED.
 */
async function drain(plane: Runtime, own: postgres.Sql, input: CreateOperationInput, n: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i += CREATE_BATCH) {
    const batch = Array.from({ length: Math.min(CREATE_BATCH, n - i) }, () => input);
    ids.push(...(await plane.store.createMany(batch)));
  }
  const until = Date.now() + DONE_TIMEOUT_MS;
  for (;;) {
    const [row] = await own`
      select exists(select 1 from operation where status = 'PENDING')
        or exists(select 1 from operation where status in ('SCHEDULED', 'IN_PROGRESS')) as busy`;
    if (row?.busy === false) break;
    if (Date.now() > until) throw new Error(`timed out waiting for ${n} operations to finish`);
    await sleep(50);
  }
  const [done] = await own`
    select count(*)::int as n from operation where id = any(${ids}::uuid[]) and status = 'COMPLETED'`;
  if (Number(done?.n) !== n) throw new Error(`${Number(done?.n)} of ${n} operations COMPLETED`);
  return ids;
}

/** CPU seconds so far of the round's processes: this one, its nats-servers, its Postgres backends. */
function cpuNow(natsPids: readonly number[]) {
  const self = process.cpuUsage();
  let nats = 0;
  for (const s of procCpuByPid((pid) => natsPids.includes(pid)).values()) nats += s;
  return {
    opstate: (self.user + self.system) / 1e6,
    nats,
    postgres: procCpuByPid((_, comm) => comm === 'postgres'),
  };
}

/** One round: a control plane and a worker on `target`, warmed up, then OPS operations timed. */
async function runRound(target: Target, run: string, index: number): Promise<Round> {
  const plane = await openRuntime(target);
  const worker = await openRuntime(target);
  const own = postgres(target.databaseUrl, {
    max: 1,
    onnotice: () => {},
    connection: { search_path: DEFAULT_DATABASE_SCHEMA },
  });
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    await lead(plane);
    target.world ??= await worldOf(plane, run);
    const { input, produced } = target.world;
    worker.startWorker({
      kinds: [OperationKind.TRANSFER],
      handlers: { [OperationKind.TRANSFER]: async () => ({ outputs: produced }) },
      concurrency: CONCURRENCY,
    });
    await drain(plane, own, input, WARM_UP);
    await sleep(1500);
    const natsPids = target.natsPids();
    const before = cpuNow(natsPids);
    const ids = await drain(plane, own, input, OPS);
    const after = cpuNow(natsPids);
    const postgresPids = await postgresPidsOf(admin, [target.database]);
    const [span] = await own`
      select extract(epoch from max(finished_at) - min(created_at))::float8 as s
      from operation where id = any(${ids}::uuid[])`;
    let pg = 0;
    for (const [pid, s] of after.postgres) {
      if (postgresPids.has(pid)) pg += s - (before.postgres.get(pid) ?? 0);
    }
    const placement = await placementOf(target);
    const round: Round = {
      target,
      seconds: Number(span?.s),
      cpu: {
        opstate: after.opstate - before.opstate,
        nats: after.nats - before.nats,
        postgres: pg,
      },
    };
    printRound(round, index, placement);
    return round;
  } finally {
    await worker.close();
    await plane.close();
    await own.end({ timeout: 5 });
    await admin.end({ timeout: 5 });
  }
}

const ms3 = (x: number) => Math.round(x * 1000) / 1000;

/** CPU milliseconds per operation of some rounds, by process group and in all. */
function cpuPerOp(rounds: readonly Round[]) {
  const n = rounds.length * OPS;
  const sum = (k: keyof Round['cpu']) => rounds.reduce((a, r) => a + r.cpu[k], 0);
  const opstate = ms3((sum('opstate') * 1000) / n);
  const nats_servers = ms3((sum('nats') * 1000) / n);
  const postgres = ms3((sum('postgres') * 1000) / n);
  return { total: ms3(opstate + nats_servers + postgres), opstate, nats_servers, postgres };
}

/** ops/s over some rounds: their operations ÷ their time (first creation to last finish, each). */
const opsPerSecond = (rounds: readonly Round[]) =>
  (rounds.length * OPS) / rounds.reduce((a, r) => a + r.seconds, 0);

function printRound(round: Round, index: number, placement: Placement): void {
  const { target } = round;
  print({
    name: 'cluster_round',
    value: OPS / round.seconds,
    unit: 'ops/s',
    round: index + 1,
    setup: target.label,
    nats_servers: target.natsPids().length,
    replicas_set: target.replicas,
    nats_version: placement.natsVersion,
    stream_replicas: placement.streamReplicas,
    stream_peers: placement.streamPeers,
    stream_peers_current: placement.streamPeersCurrent,
    heartbeat_bucket_replicas: placement.heartbeatReplicas,
    cpu_ms_per_op: cpuPerOp([round]),
    operations: OPS,
    warm_up: WARM_UP,
    database: target.database,
  });
}

function printSummary(rounds: readonly Round[], placements: Record<'r1' | 'r3', Placement>) {
  const of = (label: 'r1' | 'r3') => rounds.filter((r) => r.target.label === label);
  const [r1, r3] = [of('r1'), of('r3')];
  const cpu1 = cpuPerOp(r1);
  const cpu3 = cpuPerOp(r3);
  const ratio = (a: number, b: number) => (b === 0 ? null : Math.round((a / b) * 100) / 100);
  // Each pair's own ratio: how far the rounds spread on this machine.
  const pairs = r1.map((a, i) => {
    const b = r3[i] as Round;
    return ratio(opsPerSecond([b]), opsPerSecond([a]));
  });
  const measured = `R1: 1 nats-server, stream and heartbeat bucket at ${placements.r1.streamReplicas} and ${placements.r1.heartbeatReplicas} replicas; R3: 3 nats-servers in one cluster, at ${placements.r3.streamReplicas} and ${placements.r3.heartbeatReplicas}; nats-server ${placements.r3.natsVersion}`;
  print({
    name: 'cluster_ops_per_s_r3_vs_r1',
    value: opsPerSecond(r3),
    unit: 'ops/s',
    baseline: opsPerSecond(r1),
    note: `${OPS} TRANSFER operations per round, no-op handler, create (createMany ×${CREATE_BATCH}) → COMPLETED, control plane and one worker runtime (concurrency ${CONCURRENCY}) in this process after ${WARM_UP} untimed; rounds of each: ${PAIRS}, interleaved; ops/s = the rounds' operations ÷ their time from first created_at to last finished_at; baseline R1, value R3. ${measured}`,
    nats_version: placements.r3.natsVersion,
    replicas: { r1: placements.r1.streamReplicas, r3: placements.r3.streamReplicas },
    ratio_per_pair: pairs,
  });
  print({
    name: 'cluster_cpu_ms_per_op_r3_vs_r1',
    value: cpu3.total,
    unit: 'cpu ms/op',
    baseline: cpu1.total,
    note: 'CPU time (user+system) over the timed rounds ÷ operations: this process (control plane, worker, the bench’s polling), the round’s own nats-server processes, the Postgres backends of the round’s database and the server’s WAL writer, checkpointer and background writer; baseline R1, value R3',
    r1: cpu1,
    r3: cpu3,
    ratio_opstate: ratio(cpu3.opstate, cpu1.opstate),
    ratio_nats_servers: ratio(cpu3.nats_servers, cpu1.nats_servers),
    ratio_postgres: ratio(cpu3.postgres, cpu1.postgres),
  });
}

/** A setup's database, created here, and its names; `label` says how many replicas it keeps. */
async function openTarget(
  admin: postgres.Sql,
  run: string,
  label: Target['label'],
  natsUrl: string,
  natsPids: () => number[],
): Promise<Target> {
  const database = `opstate_cluster_${run}_${label}`;
  await admin.unsafe(`create database ${database}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  return {
    label,
    replicas: label === 'r1' ? 1 : 3,
    natsUrl,
    natsPids,
    database,
    databaseUrl: url.toString(),
    prefix: `cluster_${run}_${label}`,
  };
}

async function main(): Promise<void> {
  const run = randomBytes(5).toString('hex');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  const single = await NatsServerProcess.create();
  const cluster = await NatsClusterProcess.create(3);
  const databases: string[] = [];
  try {
    await Promise.all([single.start(), cluster.start()]);
    const pidsOf = (servers: readonly NatsServerProcess[]) => () =>
      servers.flatMap((s) => (s.pid === undefined ? [] : [s.pid]));
    const r1 = await openTarget(admin, run, 'r1', single.url, pidsOf([single]));
    databases.push(r1.database);
    const r3 = await openTarget(admin, run, 'r3', cluster.url, pidsOf(cluster.nodes));
    databases.push(r3.database);
    const rounds: Round[] = [];
    for (let p = 0; p < PAIRS; p++) {
      // R1 first in even pairs, R3 first in odd ones.
      for (const t of p % 2 === 0 ? [r1, r3] : [r3, r1]) {
        rounds.push(await runRound(t, run, rounds.length));
      }
    }
    printSummary(rounds, { r1: await placementOf(r1), r3: await placementOf(r3) });
  } finally {
    await Promise.all([single.dispose(), cluster.dispose()]);
    for (const d of databases) await admin.unsafe(`drop database if exists ${d} with (force)`);
    await admin.end({ timeout: 5 });
  }
}

await main();
