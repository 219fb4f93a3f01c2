/**
 * opstate against popular Postgres job queues, in the same run on the same Postgres: drains the
 * same number of no-op jobs through
 * - opstate: create (createMany) → COMPLETED through the control plane, NATS JetStream and a
 *   worker in this process (the e2e bench's in-process set-up);
 * - graphile-worker, batched: a local queue and batched completion (`localQueue.size`,
 *   `completeJobBatchDelay`), jobs added with `addJobs`;
 * - pg-boss, batch fetch: jobs added with `insert`, drained by concurrent `fetch(batchSize)` +
 *   `complete(ids)` loops.
 *
 * Every system is timed the same way: wall clock from the first create/add call to the moment a
 * 20 ms poll of its own tables finds no job left to run, so creation is inside the timing for all
 * three. Each run gets a database of its own, a warm-up drain first (untimed), and the raw
 * single-row commit rate of the same Postgres measured just before and just after it (the
 * machine is shared; the mean is the baseline). Prints one JSON line per figure, and opstate's
 * rate against each peer's (`"baseline"` = the peer's rate, `"ratio"` = opstate ÷ peer).
 *
 *   node --import tsx bench/peers.ts
 *
 * Env: OPSTATE_BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), NATS_URL
 * (default nats://127.0.0.1:4222), OPSTATE_BENCH_PEERS_JOBS (jobs per run, default 5000),
 * OPSTATE_BENCH_SECONDS (each raw baseline, default 3), OPSTATE_BENCH_CONCURRENCY (opstate
 * worker concurrency, default 256), OPSTATE_BENCH_GRAPHILE_CONCURRENCY (default 24),
 * OPSTATE_BENCH_GRAPHILE_LOCAL_QUEUE (default 100), OPSTATE_BENCH_PGBOSS_LOOPS (default 8),
 * OPSTATE_BENCH_PGBOSS_BATCH (default 100), OPSTATE_BENCH_WARM_UP (jobs drained untimed first,
 * default 5000).
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

const JOBS = envNumber('OPSTATE_BENCH_PEERS_JOBS', 5000);
const SECONDS = envNumber('OPSTATE_BENCH_SECONDS', 3);
const OPSTATE_CONCURRENCY = envNumber('OPSTATE_BENCH_CONCURRENCY', 256);
const GRAPHILE_CONCURRENCY = envNumber('OPSTATE_BENCH_GRAPHILE_CONCURRENCY', 24);
const GRAPHILE_LOCAL_QUEUE = envNumber('OPSTATE_BENCH_GRAPHILE_LOCAL_QUEUE', 100);
const PGBOSS_LOOPS = envNumber('OPSTATE_BENCH_PGBOSS_LOOPS', 8);
const PGBOSS_BATCH = envNumber('OPSTATE_BENCH_PGBOSS_BATCH', 100);
/** Jobs created per call, for every system (opstate's e2e bench uses the same size). */
const CREATE_BATCH = 500;
const POLL_MS = 20;
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

/** A system under test: set up on its database, drain `n` jobs, tear down. */
interface Contender {
  readonly name: string;
  readonly unit: string;
  readonly note: string;
  setUp(url: string): Promise<void>;
  /** Creates `n` jobs in batches of CREATE_BATCH. */
  create(n: number): Promise<void>;
  /** Whether any job is still waiting or running (one cheap query). */
  busy(): Promise<boolean>;
  /** Throws unless at least `n` jobs were completed so far. */
  checkCompleted(n: number): Promise<void>;
  tearDown(): Promise<void>;
}

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

function opstateContender(run: string): Contender {
  const prefix = `peers_${run}`;
  let runtime: Awaited<ReturnType<typeof createRuntime>> | undefined;
  let input: CreateOperationInput | undefined;
  let sql: postgres.Sql | undefined;
  return {
    name: 'opstate',
    unit: 'ops/s',
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
      const location = (name: string, locationType: LocationType) =>
        (runtime as NonNullable<typeof runtime>).artifacts.addLocation({
          site: 'peers',
          name,
          locationType,
          storageRoot: `/${name}`,
        });
      const source = await location('source', LocationType.SOURCE);
      const buffer = await location('buffer', LocationType.BUFFER);
      const dtp = await runtime.artifacts.addDataTransferPackage({ name: `dtp-${run}` });
      input = {
        kind: OperationKind.TRANSFER,
        fields: {
          dataTransferPackageId: dtp,
          sourceLocationId: source.id,
          destinationLocationId: buffer.id,
        },
      };
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

async function main(): Promise<void> {
  const run = randomBytes(5).toString('hex');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  const databases: string[] = [];
  const urlOf = (name: string) => {
    const u = new URL(ADMIN_URL);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const createDatabase = async (suffix: string) => {
    const name = `opstate_peers_${run}_${suffix}`;
    await admin.unsafe(`create database ${name}`);
    databases.push(name);
    return urlOf(name);
  };
  const rawSql = postgres(await createDatabase('raw'), {
    max: RAW_CONNECTIONS,
    onnotice: () => {},
  });
  const rates = new Map<string, number>();
  try {
    await prepareRawCommitRate(rawSql);
    for (const contender of [opstateContender(run), graphileContender(), pgBossContender()]) {
      const url = await createDatabase(contender.name);
      await contender.setUp(url);
      try {
        await drain(contender, WARM_UP);
        const rawBefore = await rawCommitRate(rawSql, SECONDS);
        await sleep(1000);
        const cpuBefore = cpuSample();
        const seconds = await drain(contender, JOBS);
        const cpuAfter = cpuSample();
        const postgresPids = await postgresPidsOf(admin, [databases.at(-1) as string]);
        await contender.checkCompleted(WARM_UP + JOBS);
        const rawAfter = await rawCommitRate(rawSql, SECONDS);
        const rate = JOBS / seconds;
        rates.set(contender.name, rate);
        print({
          name: `peers_${contender.name}_per_s`,
          value: rate,
          unit: contender.unit,
          baseline: (rawBefore + rawAfter) / 2,
          note: `${JOBS} no-op jobs, wall clock from the first create call to the last job done (creation inside the timing); baseline = raw single-row commit rate of the same Postgres before and after; ${contender.note}`,
          raw_commits_per_s_before_after: [Math.round(rawBefore), Math.round(rawAfter)],
        });
        const cpu = cpuMsPer(cpuBefore, cpuAfter, JOBS, postgresPids);
        print({
          name: `peers_${contender.name}_cpu_ms_per_job`,
          value: cpu.total,
          unit: 'cpu ms/job',
          note: 'CPU (user+system) over the timed drain ÷ jobs: this process (client and workers), the Postgres backends of this system’s database plus the server’s WAL writer, checkpointer and background writer (other databases’ backends on the shared server left out), and nats-server (shared; opstate only)',
          bench_process: cpu.bench_process,
          postgres: cpu.postgres,
          nats_server: cpu.nats_server,
        });
      } finally {
        await contender.tearDown();
      }
    }
    const opstate = rates.get('opstate') as number;
    for (const peer of ['graphile_worker_batched', 'pg_boss_batch_fetch']) {
      print({
        name: `peers_opstate_vs_${peer}`,
        value: opstate,
        unit: 'ops/s',
        baseline: rates.get(peer) as number,
        note: `opstate's rate ÷ ${peer}'s, both from this run; target ≥ 0.5 first, then ahead`,
      });
    }
  } finally {
    await rawSql.end({ timeout: 5 });
    for (const name of databases) {
      await admin.unsafe(`drop database if exists ${name} with (force)`).catch(() => undefined);
    }
    await admin.end({ timeout: 5 });
  }
}

await main();
