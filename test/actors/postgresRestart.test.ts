import { afterAll, describe, expect, it } from 'vitest';
import { PrivatePostgres } from '../helpers/privateServers.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { pathProblems, submitArchives, through } from './drillChecks.ts';
import {
  archiveOperation,
  type Child,
  deploymentPerTest,
  FAST_TIMING,
  waitFor,
} from './harness.ts';

/**
 * Postgres restarted (fast and immediate shutdown) under load, again and again, on a cluster of
 * the drill's own: no opstate process exits, every operation completes exactly once along a path
 * the lifecycle allows, and none waits for the reconciler's floor.
 */
let pg: PrivatePostgres | undefined;
let pgDown: PrivatePostgres | undefined;
const deploy = deploymentPerTest();
afterAll(async () => {
  await pg?.dispose();
  await pgDown?.dispose();
});

// `npm test` restarts three times; OPSTATE_DRILL_PG_RESTARTS runs the same drill longer by hand.
const RESTARTS = Math.max(1, Number(process.env.OPSTATE_DRILL_PG_RESTARTS ?? 3) || 3);
const N = Math.max(80, RESTARTS * 15);

const LOOK_FAILED = 'worker could not look for new queues';
const LOOKS_AGAIN = 'worker looks for new queues again';
/** How many lines `c` printed that hold `text`. */
const said = (c: Child, text: string) => c.output.filter((l) => l.includes(text)).length;

describe('a Postgres restart', () => {
  it(
    `${RESTARTS} restarts (fast and immediate) under load: no process exits, all ${N} operations complete once`,
    async () => {
      pg = await PrivatePostgres.create();
      await pg.start();
      const cluster = pg;
      // The reconciler's floor and ack-wait are beyond the drill: an operation that would wait for
      // them after a restart fails it (a floor of a few seconds would reset dispatches that merely
      // waited out the restart, as a floor of an hour never does).
      const dep = await deploy(
        { ...FAST_TIMING, reconcilerFloorMs: 90_000, ackWaitMs: 120_000, maxScheduled: 32 },
        { databaseUrl: cluster.url() },
      );
      const w = await makeWorld(dep.runtime.database);
      const plane = dep.spawnCli(['control-plane']);
      // Each worker serves the one queue the drill fills (a worker of every kind shares its slots
      // with five idle queues and drains this one far more slowly).
      const workers = [
        await dep.readyWorker({ FIXTURE_HOLD_MS: '30', FIXTURE_KINDS: 'long_term_archive' }),
        await dep.readyWorker({ FIXTURE_HOLD_MS: '30', FIXTURE_KINDS: 'long_term_archive' }),
      ];
      const children = [plane, ...workers];
      await waitFor(() => plane.printed('waiting for leadership'), 'the control plane to start');

      const ids: string[] = [];
      const submitting = submitArchives(dep, w, N, ids);
      const completed = async () =>
        (await through(() => dep.runtime.store.countByKindAndStatus())).long_term_archive.COMPLETED;
      for (let r = 0; r < RESTARTS; r++) {
        const before = await completed();
        await waitFor(
          async () => (await completed()) >= Math.min(N, before + 5),
          'progress between restarts',
          60_000,
          50,
        );
        await cluster.restart(r % 2 === 0 ? 'fast' : 'immediate');
      }
      await submitting;
      await waitFor(async () => (await completed()) === N, `${N} completions`, 60_000, 100);

      expect(ids).toHaveLength(N);
      expect(await pathProblems(dep.runtime.database, ids, ['reconciler'])).toEqual([]);
      const [row] = await dep.runtime.database.execute<{ live: number }>(
        `select count(*)::int as live from physical_copy where location_id = '${w.archive.id}' and status <> 'DELETED'`,
      );
      expect(row?.live).toBe(N);
      // An outage is nobody's failure: a worker waits it out inside the attempt it holds (its
      // writes and its reads for the handler), so no attempt failed and no retry was spent.
      const failures = await dep.runtime.database.execute<{ reason: string | null; by: string }>(
        `select t.by, coalesce(fe.error::text, t.reason) as reason from operation_transition t
         left join operation_failure_event fe on fe.operation_id = t.operation_id
           and fe.attempt = t.attempt
         where t.event = 'FAIL'`,
      );
      expect(failures).toEqual([]);
      for (const c of children) {
        expect(c.proc.exitCode).toBeNull();
        expect(c.proc.signalCode).toBeNull();
        expect(c.output.join('\n')).not.toMatch(/TypeError|Cannot read properties of null/);
      }
      // A worker's looks for new locations fail while the server is down: it says so once per
      // outage (WARNING), and once that they work again (INFO), never a line per failed look.
      // (Whether a restart meets a look is chance; the outage test below makes sure one does.)
      await waitFor(
        () => workers.every((c) => said(c, LOOK_FAILED) === said(c, LOOKS_AGAIN)),
        'each worker to say that its looks work again',
        30_000,
      );
      for (const c of workers) expect(said(c, LOOK_FAILED)).toBeLessThanOrEqual(RESTARTS);
      // The processes saw the outage and named it as one.
      expect(
        children.some(
          (c) =>
            c.printed('cannot reach the database or broker; backing off') ||
            c.printed('leadership cannot reach the database'),
        ),
      ).toBe(true);
    },
    120_000 + RESTARTS * 40_000,
  );

  it('a worker stopped while it waits out an outage gives up the wait, exits, and its operation completes once on another worker', async () => {
    pgDown = await PrivatePostgres.create();
    await pgDown.start();
    const cluster = pgDown;
    const dep = await deploy(
      { ...FAST_TIMING, reconcilerFloorMs: 90_000, ackWaitMs: 120_000 },
      { databaseUrl: cluster.url() },
    );
    const plane = dep.spawnCli(['control-plane']);
    // The handler records a journal step, holds for a while, then reads what it must produce.
    const first = await dep.readyWorker({
      FIXTURE_HOLD_MS: '2000',
      FIXTURE_KINDS: 'long_term_archive',
    });
    // A worker that takes none of this work, logging at debug: its looks for new locations fail
    // all through the outage.
    const watcher = await dep.readyWorker({
      FIXTURE_KINDS: 'transfer',
      OPSTATE_LOG_LEVEL: 'debug',
    });
    const { id } = await archiveOperation(dep);
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'IN_PROGRESS',
      'the first worker to start the operation',
      30_000,
    );
    await cluster.stop('fast');
    // Whichever of its database calls meets the outage first (a journal step's record, or, once
    // its hold ends, the archive stage's read of the operation or an append to its archive
    // record), the handler waits it out in place.
    await waitFor(
      () => first.printed(`operation ${id}) unreachable; waiting`),
      'the first worker to wait out the outage in its handler',
      30_000,
    );
    // Stopped mid-wait, with Postgres still down: it gives the wait up, hands the delivery back
    // and exits cleanly instead of waiting for a database that may never come back.
    first.proc.kill('SIGTERM');
    await waitFor(
      () => first.proc.exitCode !== null || first.proc.signalCode !== null,
      'the stopped worker to exit while Postgres is down',
      60_000,
    );
    expect(await first.exited).toBe(0);
    expect(first.printed('no longer waiting: the worker is stopping')).toBe(true);

    // Several looks failed by now; the watcher said so once, as a WARNING, and at debug after.
    await waitFor(() => said(watcher, LOOK_FAILED) >= 3, 'several failed looks', 30_000);

    await cluster.start();
    await waitFor(() => watcher.printed(LOOKS_AGAIN), 'the watcher to look again', 60_000);
    const levels = (text: string) =>
      watcher.output
        .filter((l) => l.includes(text))
        .map((l) => (JSON.parse(l) as { level: number }).level);
    const failed = levels(LOOK_FAILED);
    // pino's levels: 20 debug, 30 info, 40 warn.
    expect(failed[0]).toBe(40);
    expect(failed.slice(1).every((l) => l === 20)).toBe(true);
    expect(levels(LOOKS_AGAIN)).toEqual([30]);
    await dep.readyWorker({ FIXTURE_KINDS: 'long_term_archive' });
    await waitFor(
      async () => (await through(() => dep.runtime.store.load(id))).status === 'COMPLETED',
      'another worker to complete the operation',
      60_000,
      100,
    );
    expect(await pathProblems(dep.runtime.database, [id], ['reconciler'])).toEqual([]);
    // Handed back, not failed: the outage spent none of the operation's retries.
    const failures = await dep.runtime.database.execute(
      `select 1 from operation_transition where event = 'FAIL'`,
    );
    expect(failures).toEqual([]);
    const [row] = await dep.runtime.database.execute<{ live: number }>(
      `select count(*)::int as live from operation_output o join physical_copy c on c.id = o.physical_copy_id
       where o.operation_id = '${id}' and c.status <> 'DELETED'`,
    );
    expect(row?.live).toBe(1);
    expect(plane.proc.exitCode).toBeNull();
  }, 180_000);
});
