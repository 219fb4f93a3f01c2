import { DBOS } from '@dbos-inc/dbos-sdk';
import postgres from 'postgres';
import { envNumber } from '../lib/settings.ts';
import { type Contender, CREATE_BATCH } from './Contender.ts';
import { packageVersion } from './packageVersion.ts';

const CONCURRENCY = envNumber('OPSTATE_BENCH_DBOS_CONCURRENCY', 256);
/**
 * DBOS's queue dispatch loop polls its queue every second by default, which caps a drain at about
 * the queue's concurrency per second; the bench polls every 10 ms, as often as opstate's scheduler.
 */
const POLLING_MS = envNumber('OPSTATE_BENCH_DBOS_POLLING_MS', 10);
const QUEUE = 'peers_noop';
/** DBOS's system tables, in the schema it creates them in by default. */
const SCHEMA = 'dbos';

/**
 * DBOS Transact in this process: a workflow of one no-op `DBOS.runStep`, started on a queue with
 * `DBOS.startWorkflow(…, { queueName })`, CREATE_BATCH enqueues at a time; its system database is
 * the run's database on the same Postgres. Done when its `workflow_status` has no workflow
 * enqueued or pending.
 */
export function dbosContender(): Contender {
  let sql: postgres.Sql | undefined;
  let completed = 0;
  const noop = DBOS.registerWorkflow(
    async () => {
      await DBOS.runStep(async () => {}, { name: 'noop' });
      completed++;
    },
    { name: 'peersNoop' },
  );
  return {
    name: 'dbos_queue',
    unit: 'workflows/s',
    note: `DBOS Transact ${packageVersion('@dbos-inc/dbos-sdk')} (Node ${process.versions.node}): a workflow of one no-op DBOS.runStep, started on a queue (workerConcurrency ${CONCURRENCY}, minPollingIntervalMs ${POLLING_MS}: the default 1,000 ms caps a drain at about its concurrency per second) with DBOS.startWorkflow, ${CREATE_BATCH} at a time; its system database the run's database on the same Postgres; done when its workflow_status has none ENQUEUED or PENDING`,
    fields: { node: process.versions.node, queue_polling_ms: POLLING_MS },
    async setUp(url) {
      sql = postgres(url, { max: 1, onnotice: () => {} });
      DBOS.setConfig({ name: 'opstate-peers', systemDatabaseUrl: url, logLevel: 'error' });
      await DBOS.launch();
      await DBOS.registerQueue(QUEUE, {
        workerConcurrency: CONCURRENCY,
        minPollingIntervalMs: POLLING_MS,
      });
    },
    async create(n) {
      for (let i = 0; i < n; i += CREATE_BATCH) {
        const size = Math.min(CREATE_BATCH, n - i);
        await Promise.all(
          Array.from({ length: size }, () => DBOS.startWorkflow(noop, { queueName: QUEUE })()),
        );
      }
    },
    async busy() {
      const s = sql as postgres.Sql;
      const [row] = await s.unsafe(
        `select exists(select 1 from ${SCHEMA}.workflow_status where status in ('ENQUEUED', 'PENDING')) as busy`,
      );
      const failed = await s.unsafe(
        `select 1 from ${SCHEMA}.workflow_status where status not in ('ENQUEUED', 'PENDING', 'SUCCESS') limit 1`,
      );
      if (failed.length > 0) throw new Error('dbos: a workflow ended other than SUCCESS');
      return row?.busy === true;
    },
    async checkCompleted(n) {
      const [row] = await (sql as postgres.Sql).unsafe(
        `select count(*)::int as n from ${SCHEMA}.workflow_status where status = 'SUCCESS'`,
      );
      if (Number(row?.n) < n || completed < n) {
        throw new Error(`dbos: ${row?.n} workflows SUCCESS (${completed} ran), expected ${n}`);
      }
    },
    async tearDown() {
      await DBOS.shutdown();
      await sql?.end({ timeout: 5 });
    },
  };
}
