import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { type Database, openDatabase } from '../persistence/openDatabase.ts';
import { type RuntimeTiming, resolveRuntimeTiming } from '../runtime/RuntimeTiming.ts';
import { ensureBuilt } from './builtPackage.ts';
import { Cluster } from './cluster.ts';
import { type ChaosFacts, collectFacts } from './facts.ts';
import { FAULT_KINDS, type FaultKind, type FaultRecord, inject } from './faults.ts';
import { type ChaosFigure, chaosFigures } from './figures.ts';
import { checkInvariants, type InvariantResult } from './invariants.ts';
import { NatsServerProcess, PrivatePostgres } from './privateServers.ts';
import { Rng } from './rng.ts';
import { waitFor } from './waitFor.ts';
import { type PipelineResult, persist, Workload } from './workload.ts';

/**
 * Short timers in the order the runtime demands. The heartbeat timeout is many intervals long, so
 * that a worker starved of CPU on a busy machine is not taken for a dead one.
 */
export const CHAOS_TIMING: Partial<RuntimeTiming> = {
  heartbeatIntervalMs: 250,
  heartbeatTimeoutMs: 4_000,
  reconcilerFloorMs: 10_000,
  ackWaitMs: 15_000,
  monitorIntervalMs: 250,
  reconcilerIntervalMs: 500,
  schedulerIntervalMs: 50,
  relayIntervalMs: 50,
  leaderPollMs: 250,
  leaderLeaseMs: 3_000,
  maxScheduled: 128,
};

export interface ChaosOptions {
  readonly seed: number;
  /** How long new pipelines are started and faults injected. */
  readonly workloadMs: number;
  /** Pipelines in flight at once. */
  readonly parallel: number;
  readonly workers: number;
  /** Faults: `all-once` injects each kind once in a seeded order; `random` keeps drawing. */
  readonly faults: 'all-once' | 'random';
  /** Pause between faults, drawn from [min, max] ms. */
  readonly gapMs: readonly [number, number];
  /** After the workload: how long operations and deletions get to settle. */
  readonly settleMs: number;
  readonly timing?: Partial<RuntimeTiming>;
  /** Called with each line of progress (faults as they happen). */
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: number;
  readonly faults: readonly FaultRecord[];
  readonly pipelines: readonly PipelineResult[];
  readonly invariants: readonly InvariantResult[];
  readonly figures: readonly ChaosFigure[];
  readonly facts: ChaosFacts;
  /**
   * Whether every copy deletion had ended: none scheduled or in progress, and no archived buffer
   * copy still PRESENT.
   */
  readonly deletionsSettled: boolean;
}

interface Servers {
  postgres: PrivatePostgres;
  nats: NatsServerProcess;
  storage: string;
}

async function startServers(): Promise<Servers> {
  const postgres = await PrivatePostgres.create();
  await postgres.start();
  const nats = await NatsServerProcess.create();
  await nats.start();
  const storage = await mkdtemp(join(tmpdir(), 'opstate-chaos-storage-'));
  return { postgres, nats, storage };
}

async function startCluster(s: Servers, timing: Partial<RuntimeTiming>, workers: number) {
  const cluster = new Cluster({
    databaseUrl: s.postgres.url('postgres'),
    natsUrl: s.nats.url,
    prefix: `chaos_${randomBytes(4).toString('hex')}`,
    timing,
    deleterLeaseMs: 3_000,
    deleterIntervalMs: 500,
    workerConcurrency: 4,
  });
  const migrate = await cluster.command(['migrate']);
  if (migrate.code !== 0) throw new Error(`opstate migrate failed: ${migrate.output}`);
  // Buffer copies are deleted as soon as their archive is verified.
  const policy = await cluster.command(['policy', 'set', '--clean', 'buffer', '--grace', '0']);
  if (policy.code !== 0) throw new Error(`opstate policy set failed: ${policy.output}`);
  cluster.startControlPlane();
  cluster.startControlPlane();
  for (let i = 0; i < workers; i++) cluster.startWorker();
  await waitFor(
    () => cluster.workers.every((w) => w.output.some((l) => l.includes('started for'))),
    'every worker to start',
    120_000,
    100,
  );
  return cluster;
}

/** Keeps `parallel` pipelines in flight until `untilAt`, then lets the last ones finish. */
async function driveWorkload(
  workload: Workload,
  o: ChaosOptions,
  untilAt: number,
  deadlineAt: number,
) {
  const results: PipelineResult[] = [];
  const lane = async () => {
    while (Date.now() < untilAt) results.push(await workload.pipeline(deadlineAt));
  };
  await Promise.all(Array.from({ length: o.parallel }, lane));
  return results;
}

async function injectFaults(
  o: ChaosOptions,
  targets: Parameters<typeof inject>[1],
  untilAt: number,
): Promise<FaultRecord[]> {
  const rng = targets.rng;
  const plan: FaultKind[] = o.faults === 'all-once' ? rng.shuffle(FAULT_KINDS) : [];
  const records: FaultRecord[] = [];
  const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
  for (;;) {
    await pause(rng.int(o.gapMs[0], o.gapMs[1]));
    const kind = o.faults === 'all-once' ? plan.shift() : rng.pick(FAULT_KINDS);
    if (kind === undefined || (o.faults === 'random' && Date.now() > untilAt)) return records;
    const record = await inject(kind, targets);
    records.push(record);
    o.log?.(`fault ${kind} at ${record.at.toISOString()}: ${record.detail}`);
  }
}

/**
 * No deletion waits or runs, and none is still due: every buffer copy a completed long-term
 * archive consumed has left PRESENT (the policy cleans buffer copies at once).
 */
async function deletionsIdle(database: Database): Promise<boolean> {
  const [row] = await database.execute<{ n: number }>(sql`
    select count(*)::int as n from physical_copy c join data_location l on l.id = c.location_id
    where c.status in ('DELETION_SCHEDULED', 'DELETION_IN_PROGRESS')
       or (c.status = 'PRESENT' and l.location_type = 'buffer' and exists (
             select 1 from operation_input i join operation o on o.id = i.operation_id
             where i.physical_copy_id = c.id and o.kind = 'long_term_archive'
               and o.status = 'COMPLETED'))`);
  return row?.n === 0;
}

/**
 * A chaos run: a private Postgres cluster and nats-server, two `opstate control-plane` and
 * `workers` `opstate worker` processes (reference stage handlers, a deleter each), sample
 * pipelines of every kind, faults at seeded random moments; then every invariant checked from the
 * database and the storage, and the figures. Stops everything it started. Its processes run the
 * built package, rebuilt first when a source changed since the last build.
 */
export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  ensureBuilt();
  const timing = resolveRuntimeTiming({ ...CHAOS_TIMING, ...o.timing });
  const servers = await startServers();
  let cluster: Cluster | undefined;
  let database: Database | undefined;
  try {
    cluster = await startCluster(servers, { ...CHAOS_TIMING, ...o.timing }, o.workers);
    database = await openDatabase({ databaseUrl: servers.postgres.url('postgres'), max: 4 });
    const workload = new Workload(database, servers.storage, {
      packages: 2,
      files: 2,
      maxRetries: 10,
    });
    await workload.init();
    const rng = new Rng(o.seed);
    const start = Date.now();
    const untilAt = start + o.workloadMs;
    const deadlineAt = untilAt + o.settleMs;
    const targets = {
      cluster,
      postgres: servers.postgres,
      nats: servers.nats,
      database,
      prefix: cluster.settings.prefix,
      timing,
      rng,
    };
    const [pipelines, faults] = await Promise.all([
      driveWorkload(workload, o, untilAt, deadlineAt),
      injectFaults(o, targets, untilAt),
    ]);
    const db = database;
    const deletionsSettled = await waitFor(
      () => deletionsIdle(db).catch(() => false),
      'copy deletions to end',
      Math.max(5_000, deadlineAt - Date.now()),
      250,
    ).then(
      () => true,
      () => false,
    );
    await cluster.close();
    const facts = await persist('collecting facts', () => collectFacts(db), Date.now() + 60_000);
    return {
      seed: o.seed,
      faults,
      pipelines,
      invariants: checkInvariants(facts),
      figures: chaosFigures(facts, faults, timing),
      facts,
      deletionsSettled,
    };
  } finally {
    await cluster?.close();
    await database?.close().catch(() => undefined);
    await servers.nats.dispose();
    await servers.postgres.dispose();
    await rm(servers.storage, { recursive: true, force: true });
  }
}
