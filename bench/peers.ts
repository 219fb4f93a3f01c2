/**
 * opstate against popular Postgres job queues and two durable-execution engines, in the same run
 * on the same machine: drains the same number of no-op jobs through
 * - opstate: create (createMany) → COMPLETED through the control plane, NATS JetStream and a
 *   worker in this process (the e2e bench's in-process set-up);
 * - graphile-worker, batched: a local queue and batched completion (`localQueue.size`,
 *   `completeJobBatchDelay`), jobs added with `addJobs`;
 * - pg-boss, batch fetch: jobs added with `insert`, drained by concurrent `fetch(batchSize)` +
 *   `complete(ids)` loops;
 * - DBOS Transact (bench/peers/dbosContender.ts): a workflow of one `runStep` started on a queue
 *   polled every OPSTATE_BENCH_DBOS_POLLING_MS (10 ms; DBOS's default 1 s caps a drain at about
 *   the queue's concurrency per second), its system database on the same Postgres;
 * - Restate (bench/peers/restateRun.ts): restate-server from the npm registry and a service with
 *   one `ctx.run` step per invocation, on Node 22 (the SDK needs it; bench/peers/node22.ts finds or
 *   fetches one), in a network namespace of their own with only loopback up (`unshare -n`, so as
 *   root): the server calls an outside release feed at every start, with no setting to stop it.
 *
 * Every system is timed the same way: wall clock from the first create/add call to the moment a
 * 20 ms poll of its own tables finds no job left to run, so creation is inside the timing for all
 * of them (Restate: the server's invocation table, queried once the service has run as many
 * handlers). Each run gets a database of its own, a warm-up drain first (untimed), and the raw
 * single-row commit rate of the same Postgres measured just before and just after it (the
 * machine is shared; the mean is the baseline). Prints one JSON line per figure, each with the
 * Node version that ran the system (`"node"`), and opstate's rate against each peer's
 * (`"baseline"` = the peer's rate, `"ratio"` = opstate ÷ peer). CPU per job counts every process
 * involved: this one, the system's Postgres backends (and NATS for opstate); for Restate its
 * server, the service and the driver.
 *
 *   node --import tsx bench/peers.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), NATS_URL
 * (default nats://127.0.0.1:4222), OPSTATE_BENCH_PEERS_JOBS (jobs per run, default 5000),
 * OPSTATE_BENCH_SECONDS (each raw baseline, default 3), OPSTATE_BENCH_CONCURRENCY (opstate
 * worker concurrency, default 256), OPSTATE_BENCH_GRAPHILE_CONCURRENCY (default 24),
 * OPSTATE_BENCH_GRAPHILE_LOCAL_QUEUE (default 100), OPSTATE_BENCH_PGBOSS_LOOPS (default 8),
 * OPSTATE_BENCH_PGBOSS_BATCH (default 100), OPSTATE_BENCH_DBOS_CONCURRENCY (the queue's
 * workerConcurrency, default 256), OPSTATE_BENCH_DBOS_POLLING_MS (default 10),
 * OPSTATE_BENCH_WARM_UP (jobs drained untimed first, default 5000), OPSTATE_BENCH_PEERS (the
 * peers to run, comma-separated, of graphile, pgboss, dbos, restate; default all).
 */
import { randomBytes } from 'node:crypto';
import { makeWorkerUtils, type Runner, run as runGraphileWorker } from 'graphile-worker';
import PgBoss from 'pg-boss';
import postgres from 'postgres';
import { OperationKind } from '../machines/OperationKind.ts';
import { LocationType } from '../machines/routing.ts';
import type { Logger } from '../observe/Logger.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { DEFAULT_DATABASE_SCHEMA } from '../persistence/databaseSchema.ts';
import { createRuntime, type RuntimeTiming } from '../runtime/Runtime.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import { cpuMsPer, cpuSample, postgresPidsOf } from './lib/cpu.ts';
import { print } from './lib/figure.ts';
import { prepareRawCommitRate, RAW_CONNECTIONS, rawCommitRate } from './lib/rawCommitRate.ts';
import { ADMIN_URL, envNumber, NATS_URL, WARM_UP } from './lib/settings.ts';
import { type Contender, CREATE_BATCH, POLL_MS } from './peers/Contender.ts';
import { dbosContender } from './peers/dbosContender.ts';
import { restateNote, restateVersions, runRestate } from './peers/restateRun.ts';

const JOBS = envNumber('OPSTATE_BENCH_PEERS_JOBS', 5000);
const SECONDS = envNumber('OPSTATE_BENCH_SECONDS', 3);
const OPSTATE_CONCURRENCY = envNumber('OPSTATE_BENCH_CONCURRENCY', 256);
const GRAPHILE_CONCURRENCY = envNumber('OPSTATE_BENCH_GRAPHILE_CONCURRENCY', 24);
const GRAPHILE_LOCAL_QUEUE = envNumber('OPSTATE_BENCH_GRAPHILE_LOCAL_QUEUE', 100);
const PGBOSS_LOOPS = envNumber('OPSTATE_BENCH_PGBOSS_LOOPS', 8);
const PGBOSS_BATCH = envNumber('OPSTATE_BENCH_PGBOSS_BATCH', 100);
const DONE_TIMEOUT_MS = 180_000;

/** The same control-plane timers as the e2e bench; the transport keeps its defaults. */
const OPSTATE_TIMING: Partial<RuntimeTiming> = {
  schedulerIntervalMs: 10,
  relayIntervalMs: 10,
  leaderPollMs: 250,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const quiet: Logger = {
  log(level, message, fields) {
    if (level === 'WARNING' || level === 'ERROR') {
      process.stderr.write(`[peers] ${level} ${message} ${JSON.stringify(fields ?? {})}\n`);
    }
  },
};

async function drain(c: Contender, n: number): Promise<number> {
  const t0 = performance.now();
  await c.create(n);
  const deadline = Date.now() + DONE_TIMEOUT_MS;
  while (await c.busy()) {
    if (Date.now() > deadline) throw new Error(`${c.name}: jobs still running after the deadline`);
    await sleep(POLL_MS);
  }
  return (performance.now() - t0) / 1000;
}

/** Where the opstate contender's transfers go, and the input each is submitted with. */
async function transferInput(
  runtime: Awaited<ReturnType<typeof createRuntime>>,
  run: string,
): Promise<{ input: CreateOperationInput; dtp: string; buffer: { id: string } }> {
  const location = (name: string, locationType: LocationType) =>
    runtime.artifacts.addLocation({ site: 'peers', name, locationType, storageRoot: `/${name}` });
  const source = await location('source', LocationType.SOURCE);
  const buffer = await location('buffer', LocationType.BUFFER);
  const dtp = await runtime.artifacts.addDataTransferPackage({ name: `dtp-${run}` });
  const input: CreateOperationInput = {
    kind: OperationKind.TRANSFER,
    fields: {
      dataTransferPackageId: dtp,
      sourceLocationId: source.id,
      destinationLocationId: buffer.id,
    },
  };
  return { input, dtp, buffer };
}

function opstateContender(run: string): Contender {
  const prefix = `peers_${run}`;
  let runtime: Awaited<ReturnType<typeof createRuntime>> | undefined;
  let input: CreateOperationInput | undefined;
  let sql: postgres.Sql | undefined;
  return {
    name: 'opstate',
    unit: 'ops/s',
    usesNats: true,
    note: `opstate: TRANSFER operations, no-op handler, createMany ×${CREATE_BATCH} → COMPLETED; control plane and one worker (concurrency ${OPSTATE_CONCURRENCY}) in this process on Postgres and NATS JetStream; four transitions, their history and the outbox persisted per operation`,
    async setUp(url) {
      // opstate's tables live in its own schema: its polling reads them there.
      sql = postgres(url, {
        max: 1,
        onnotice: () => {},
        connection: { search_path: DEFAULT_DATABASE_SCHEMA },
      });
      runtime = await createRuntime({
        databaseUrl: url,
        natsUrl: NATS_URL,
        prefix,
        timing: OPSTATE_TIMING,
        logger: quiet,
      });
      const plane = runtime.startControlPlane();
      const until = Date.now() + 10_000;
      while (!plane.isLeader) {
        if (Date.now() > until) throw new Error('opstate: the control plane was never elected');
        await sleep(20);
      }
      const { input: transfer, dtp, buffer } = await transferInput(runtime, run);
      input = transfer;
      runtime.startWorker({
        kinds: [OperationKind.TRANSFER],
        // The copy every transfer must produce (one live copy; later ones find it there).
        handlers: {
          [OperationKind.TRANSFER]: async () => ({
            outputs: [
              { artifactType: 'data_transfer_package', artifactId: dtp, locationId: buffer.id },
            ],
          }),
        },
        concurrency: OPSTATE_CONCURRENCY,
      });
    },
    async create(n) {
      const r = runtime as NonNullable<typeof runtime>;
      for (let i = 0; i < n; i += CREATE_BATCH) {
        const size = Math.min(CREATE_BATCH, n - i);
        await r.submitMany(Array.from({ length: size }, () => input as CreateOperationInput));
      }
    },
    async busy() {
      const [row] = await (sql as postgres.Sql).unsafe(
        `select exists(select 1 from operation where status = 'PENDING')
           or exists(select 1 from operation where status in ('SCHEDULED', 'IN_PROGRESS')) as busy`,
      );
      if (
        (
          await (sql as postgres.Sql).unsafe(
            `select 1 from operation where status = 'FAILED' limit 1`,
          )
        ).length > 0
      ) {
        throw new Error('opstate: an operation FAILED');
      }
      return row?.busy === true;
    },
    async checkCompleted(n) {
      const [row] = await (sql as postgres.Sql).unsafe(
        `select count(*)::int as n from operation where status = 'COMPLETED'`,
      );
      if (Number(row?.n) < n) throw new Error(`opstate: ${row?.n} COMPLETED, expected ${n}`);
    },
    async tearDown() {
      await runtime?.close();
      const t = await createJetStreamTransport({
        insecureNats: true,
        servers: NATS_URL,
        prefix,
      }).catch(() => undefined);
      await t?.destroy().catch(() => undefined);
      await sql?.end({ timeout: 5 });
    },
  };
}

function graphileContender(): Contender {
  let runner: Runner | undefined;
  let utils: Awaited<ReturnType<typeof makeWorkerUtils>> | undefined;
  let sql: postgres.Sql | undefined;
  let completed = 0;
  const silent = () => () => {};
  return {
    name: 'graphile_worker_batched',
    unit: 'jobs/s',
    note: `graphile-worker (Node 20 line) run() with concurrency ${GRAPHILE_CONCURRENCY}, localQueue.size ${GRAPHILE_LOCAL_QUEUE}, completeJobBatchDelay 0 (batched completion); jobs added with addJobs ×${CREATE_BATCH}; a no-op task; done when its jobs table is empty (completed jobs are deleted)`,
    async setUp(url) {
      sql = postgres(url, { max: 1, onnotice: () => {} });
      const { Logger } = await import('graphile-worker');
      const logger = new Logger(silent);
      utils = await makeWorkerUtils({ connectionString: url, logger });
      await utils.migrate();
      runner = await runGraphileWorker({
        connectionString: url,
        concurrency: GRAPHILE_CONCURRENCY,
        noHandleSignals: true,
        pollInterval: 1000,
        logger,
        taskList: {
          noop: async () => {
            completed++;
          },
        },
        preset: {
          worker: {
            localQueue: { size: GRAPHILE_LOCAL_QUEUE },
            completeJobBatchDelay: 0,
            failJobBatchDelay: 0,
          },
        },
      });
    },
    async create(n) {
      const u = utils as NonNullable<typeof utils>;
      for (let i = 0; i < n; i += CREATE_BATCH) {
        const size = Math.min(CREATE_BATCH, n - i);
        await u.addJobs(Array.from({ length: size }, () => ({ identifier: 'noop', payload: {} })));
      }
    },
    async busy() {
      const [row] = await (sql as postgres.Sql).unsafe(
        'select exists(select 1 from graphile_worker._private_jobs) as busy',
      );
      return row?.busy === true;
    },
    async checkCompleted(n) {
      if (completed < n) throw new Error(`graphile-worker: ran ${completed} jobs, expected ${n}`);
    },
    async tearDown() {
      await runner?.stop();
      await utils?.release();
      await sql?.end({ timeout: 5 });
    },
  };
}

function pgBossContender(): Contender {
  const queue = 'noop';
  let boss: PgBoss | undefined;
  let sql: postgres.Sql | undefined;
  let stop = false;
  let loops: Promise<void>[] = [];
  let completed = 0;
  return {
    name: 'pg_boss_batch_fetch',
    unit: 'jobs/s',
    note: `pg-boss (Node 20 line) with ${PGBOSS_LOOPS} concurrent loops of fetch(batchSize ${PGBOSS_BATCH}) + complete(ids) (its worker loop waits its polling interval, ≥ 0.5 s, between fetches); jobs added with insert ×${CREATE_BATCH}; done when no job is created, retry or active`,
    async setUp(url) {
      sql = postgres(url, { max: 1, onnotice: () => {} });
      boss = new PgBoss({
        connectionString: url,
        max: PGBOSS_LOOPS + 2,
        supervise: false,
        schedule: false,
      });
      boss.on('error', (err) => process.stderr.write(`[peers] pg-boss: ${String(err)}\n`));
      await boss.start();
      await boss.createQueue(queue);
      const b = boss;
      loops = Array.from({ length: PGBOSS_LOOPS }, async () => {
        while (!stop) {
          const jobs = await b.fetch(queue, { batchSize: PGBOSS_BATCH });
          if (jobs === null || jobs.length === 0) {
            await sleep(POLL_MS);
            continue;
          }
          await b.complete(
            queue,
            jobs.map((j) => j.id),
          );
          completed += jobs.length;
        }
      });
    },
    async create(n) {
      const b = boss as PgBoss;
      for (let i = 0; i < n; i += CREATE_BATCH) {
        const size = Math.min(CREATE_BATCH, n - i);
        await b.insert(Array.from({ length: size }, () => ({ name: queue, data: {} })));
      }
    },
    async busy() {
      const [row] = await (sql as postgres.Sql).unsafe(
        `select exists(select 1 from pgboss.job where name = $1 and state in ('created', 'retry', 'active')) as busy`,
        [queue],
      );
      return row?.busy === true;
    },
    async checkCompleted(n) {
      if (completed < n) throw new Error(`pg-boss: completed ${completed} jobs, expected ${n}`);
    },
    async tearDown() {
      stop = true;
      await Promise.all(loops);
      await boss?.stop({ graceful: false, wait: true });
      await sql?.end({ timeout: 5 });
    },
  };
}

/** The peers that run (OPSTATE_BENCH_PEERS, comma-separated; default all); opstate always runs. */
const PEERS = (process.env.OPSTATE_BENCH_PEERS || 'graphile,pgboss,dbos,restate')
  .split(',')
  .map((p) => p.trim());
const KNOWN_PEERS = ['graphile', 'pgboss', 'dbos', 'restate'];

/** The note every throughput figure starts with. */
const TIMING_NOTE = `${JOBS} no-op jobs, wall clock from the first create call to the last job done (creation inside the timing); baseline = raw single-row commit rate of the same Postgres before and after`;

/** A run's databases on the shared Postgres, each dropped at the end. */
interface Databases {
  readonly admin: postgres.Sql;
  readonly names: string[];
  create(suffix: string): Promise<string>;
}

function databases(run: string): Databases {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  const names: string[] = [];
  return {
    admin,
    names,
    async create(suffix) {
      const name = `opstate_peers_${run}_${suffix}`;
      await admin.unsafe(`create database ${name}`);
      names.push(name);
      const u = new URL(ADMIN_URL);
      u.pathname = `/${name}`;
      return u.toString();
    },
  };
}

/** Warms `contender` up, times its drain of JOBS, prints its rate and CPU; returns the rate. */
async function timeContender(c: Contender, dbs: Databases, rawSql: postgres.Sql) {
  await c.setUp(await dbs.create(c.name));
  try {
    await drain(c, WARM_UP);
    const rawBefore = await rawCommitRate(rawSql, SECONDS);
    await sleep(1000);
    const cpuBefore = cpuSample();
    const seconds = await drain(c, JOBS);
    const cpuAfter = cpuSample();
    const postgresPids = await postgresPidsOf(dbs.admin, [dbs.names.at(-1) as string]);
    await c.checkCompleted(WARM_UP + JOBS);
    const rawAfter = await rawCommitRate(rawSql, SECONDS);
    const fields = { node: process.versions.node, ...c.fields };
    print({
      name: `peers_${c.name}_per_s`,
      value: JOBS / seconds,
      unit: c.unit,
      baseline: (rawBefore + rawAfter) / 2,
      note: `${TIMING_NOTE}; ${c.note}`,
      raw_commits_per_s_before_after: [Math.round(rawBefore), Math.round(rawAfter)],
      ...fields,
    });
    const cpu = cpuMsPer(cpuBefore, cpuAfter, JOBS, postgresPids);
    // nats-server serves other work on a shared machine: only opstate's figure counts it.
    const nats = c.usesNats === true ? { nats_server: cpu.nats_server } : {};
    print({
      name: `peers_${c.name}_cpu_ms_per_job`,
      value: Math.round((cpu.bench_process + cpu.postgres + (nats.nats_server ?? 0)) * 1e3) / 1e3,
      unit: 'cpu ms/job',
      note: 'CPU (user+system) over the timed drain ÷ jobs: this process (client and workers), the Postgres backends of this system’s database plus the server’s WAL writer, checkpointer and background writer (other databases’ backends on the shared server left out), and nats-server for opstate only (the one system that uses it)',
      bench_process: cpu.bench_process,
      postgres: cpu.postgres,
      ...nats,
      ...fields,
    });
    return JOBS / seconds;
  } finally {
    await c.tearDown();
  }
}

/** Times Restate in its network namespace (bench/peers/restateRun.ts); returns its rate. */
async function timeRestate(rawSql: postgres.Sql): Promise<number> {
  const versions = restateVersions();
  const rawBefore = await rawCommitRate(rawSql, SECONDS);
  const r = await runRestate({
    OPSTATE_BENCH_PEERS_JOBS: String(JOBS),
    OPSTATE_BENCH_WARM_UP: String(WARM_UP),
  });
  const rawAfter = await rawCommitRate(rawSql, SECONDS);
  const rate = r.jobs / r.seconds;
  print({
    name: 'peers_restate_per_s',
    value: rate,
    unit: 'invocations/s',
    baseline: (rawBefore + rawAfter) / 2,
    note: `${TIMING_NOTE} (Restate does not use that Postgres: the raw rate is measured around its whole run, start-up and warm-up included); ${restateNote(versions, r.node)}`,
    raw_commits_per_s_before_after: [Math.round(rawBefore), Math.round(rawAfter)],
    node: r.node,
  });
  const c = r.cpu_ms_per_invocation;
  print({
    name: 'peers_restate_cpu_ms_per_job',
    value: Math.round((c.restate_server + c.service + c.driver) * 1e3) / 1e3,
    unit: 'cpu ms/job',
    note: 'CPU (user+system) over the timed drain ÷ invocations: restate-server (all its threads), the service process and the driver process (the sends and the completion polls); the server’s share includes its completion queries (completion_polls × restate_server_cpu_ms_per_poll, the latter measured after the drain)',
    ...c,
    completion_polls: r.completion_polls,
    restate_server_cpu_ms_per_poll: r.restate_server_cpu_ms_per_poll,
    node: r.node,
  });
  return rate;
}

/** The target each ratio is read against (issue: ≥ 6 × every durable-execution engine). */
const TARGETS: Readonly<Record<string, string>> = {
  graphile_worker_batched: 'target ≥ 0.3, on the way to ≥ 0.5',
  pg_boss_batch_fetch: 'no target: a job queue that persists far less',
  dbos_queue: 'target ≥ 6 (a durable-execution engine doing the same job)',
  restate: 'target ≥ 6 (a durable-execution engine doing the same job)',
};

function printRatios(rates: ReadonlyMap<string, number>): void {
  const opstate = rates.get('opstate') as number;
  for (const [peer, rate] of rates) {
    if (peer === 'opstate') continue;
    print({
      name: `peers_opstate_vs_${peer}`,
      value: opstate,
      unit: 'ops/s',
      baseline: rate,
      note: `opstate's rate ÷ ${peer}'s, both from this run; ${TARGETS[peer]}`,
    });
  }
}

async function main(): Promise<void> {
  const unknown = PEERS.filter((p) => !KNOWN_PEERS.includes(p));
  if (unknown.length > 0) {
    throw new Error(
      `OPSTATE_BENCH_PEERS: unknown peer ${unknown.join(', ')}; choose from ${KNOWN_PEERS.join(', ')}`,
    );
  }
  const run = randomBytes(5).toString('hex');
  const dbs = databases(run);
  const rawSql = postgres(await dbs.create('raw'), { max: RAW_CONNECTIONS, onnotice: () => {} });
  const rates = new Map<string, number>();
  try {
    await prepareRawCommitRate(rawSql);
    const factories: [string, () => Contender][] = [
      ['opstate', () => opstateContender(run)],
      ['graphile', graphileContender],
      ['pgboss', pgBossContender],
      ['dbos', dbosContender],
    ];
    for (const [peer, make] of factories) {
      if (peer !== 'opstate' && !PEERS.includes(peer)) continue;
      const c = make();
      rates.set(c.name, await timeContender(c, dbs, rawSql));
    }
    if (PEERS.includes('restate')) rates.set('restate', await timeRestate(rawSql));
    printRatios(rates);
  } finally {
    await rawSql.end({ timeout: 5 });
    for (const name of dbs.names) {
      await dbs.admin.unsafe(`drop database if exists ${name} with (force)`).catch(() => undefined);
    }
    await dbs.admin.end({ timeout: 5 });
  }
}

await main();
