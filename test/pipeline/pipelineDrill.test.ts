import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { Rng } from '../../chaos/rng.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { listPackagesInState } from '../../persistence/reads/listPackagesInState.ts';
import { type Child, deploymentPerTest, FAST_TIMING, kill9, waitFor } from '../actors/harness.ts';
import { handlersModule, REPO_ROOT } from '../helpers/opstateCli.ts';
import {
  declareFilesComplete,
  pipelineOutcomeProblems,
  registerBundles,
  writePipelineModule,
} from '../helpers/pipelineOperations.ts';

/**
 * The default pipeline end to end with worker processes SIGKILLed at random: an `opstate
 * control-plane --pipeline` process and three `opstate worker` processes running the reference
 * stage handlers, on the real Postgres and NATS JetStream. Fifty packages in five transfer
 * packages have their files declared complete; the leader's pass creates every stage. At seeded
 * moments of the run (after a seeded number of completions), a worker (one holding work when
 * there is one) is killed and started again, under its own id or a new one, as a supervisor
 * would. In the end every package is ARCHIVED (derived, as `opstate status` counts it), one
 * operation exists per (kind, subject, location), no artifact has two live copies at a location,
 * and every operation's path is a lifecycle path with exactly one COMPLETE.
 *
 * `OPSTATE_DRILL_SEED` replays a run's choice of moments, victims and ids.
 */
const deploy = deploymentPerTest();
const BUNDLES = 5;
const PER_BUNDLE = 10;
const PACKAGES = BUNDLES * PER_BUNDLE;
const WORKERS = 3;
const KILLS = 6;
/** Packaging and archive per package; bundling, transfer and unpack per bundle. */
const OPERATIONS = 2 * PACKAGES + 3 * BUNDLES;
const STAGE_HANDLERS = handlersModule(join(REPO_ROOT, 'stages', 'handlers.ts'));

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('the default pipeline with workers killed at random', () => {
  it('archives every package, each operation created once and completed once', async () => {
    const seed = Number(process.env.OPSTATE_DRILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const rng = new Rng(seed);
    const log: string[] = [`seed ${seed}`];
    process.stdout.write(`pipeline drill: seed ${seed}\n`);
    // As many dispatches out as the workers alive while one restarts have slots (two workers of
    // four slots), so none waits in a queue long enough for the reconciler's floor to take it for lost; the
    // floor covers a worker restarted under its own id, whose new heartbeat lists nothing.
    const dep = await deploy({
      ...FAST_TIMING,
      maxScheduled: 8,
      reconcilerFloorMs: 10_000,
      ackWaitMs: 12_000,
    });
    const rt = dep.runtime;
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-drill-'));
    const site = `pdrill-${randomUUID().slice(0, 8)}`;
    const module = await writePipelineModule(dir, site);
    // Five transfer packages of ten packages, two small files each, at one set of locations.
    const worlds = await registerBundles(rt.artifacts, join(dir, 'storage'), {
      site,
      bundles: BUNDLES,
      perBundle: PER_BUNDLE,
    });

    const plane = dep.spawnCli(['control-plane', '--pipeline', module]);
    const workers = new Map<string, Child>();
    const startWorker = (id: string) => {
      const child = dep.spawnCli([
        'worker',
        '--kinds',
        'all',
        '--handlers',
        STAGE_HANDLERS,
        '--id',
        id,
        '--concurrency',
        '4',
      ]);
      workers.set(id, child);
      return child;
    };
    /**
     * Starts a worker as a supervisor restarts one: under its dead predecessor's id, it is refused
     * (exit 2, the id in use) until that heartbeat goes stale, and is started again until it runs.
     */
    const supervised = async (id: string) => {
      for (;;) {
        const child = startWorker(id);
        let code: number | null | undefined;
        void child.exited.then((c) => {
          code = c;
        });
        await waitFor(
          () => child.printed('started for') || code !== undefined,
          `worker ${id} to start`,
          60_000,
        );
        if (child.printed('started for')) return;
        const text = child.output.join('\n');
        if (code !== 2 || !text.includes('is in use')) {
          throw new Error(`worker ${id} exited with ${String(code)}:\n${text}`);
        }
        log.push(`${id} refused while its predecessor's heartbeat was fresh`);
      }
    };
    for (let i = 1; i <= WORKERS; i++) startWorker(`w-${i}`);
    let nextId = WORKERS;

    await declareFilesComplete(rt.artifacts, worlds);

    // Completions so far; an operation that FAILED ends the drill at once, with its history.
    const completed = async () => {
      const [row] = await rt.database.execute(
        sql`select count(*) filter (where status = 'COMPLETED')::int as n,
              (array_agg(id::text) filter (where status = 'FAILED'))[1] as failed
            from operation`,
      );
      if (row?.failed !== null && row?.failed !== undefined) {
        const history = (await rt.get(String(row.failed))).transitions
          .map((t) => `${t.from}>${t.event}(${t.by})>${t.to} ${t.reason ?? ''}`)
          .join('\n');
        throw new Error(`operation ${row.failed} FAILED (${log.join('; ')}):\n${history}`);
      }
      return Number(row?.n);
    };
    // The kills fall after seeded numbers of completions, spread over the whole run, so every
    // stage runs with workers dying around it.
    const moments = rng
      .shuffle(Array.from({ length: OPERATIONS - 10 }, (_, i) => i + 1))
      .slice(0, KILLS)
      .sort((a, b) => a - b);
    log.push(`kills after ${moments.join(', ')} completions`);
    let holding = 0;
    // The attempts a kill left IN_PROGRESS under the dead worker: each must be taken back (RESET).
    const stranded: { id: string; attempt: number; worker: string }[] = [];
    for (const moment of moments) {
      await waitFor(
        async () => (await completed()) >= moment,
        `${moment} completions`,
        120_000,
        100,
      );
      // Busy: a heartbeat lists what it holds (pulled or started), or it has started work that
      // has not finished (a heartbeat can be a beat behind either way).
      const beats = await rt.transport.heartbeats.list();
      const started = await rt.database.execute(
        sql`select distinct worker_id from operation where status = 'IN_PROGRESS'`,
      );
      const busy = new Set([
        ...beats.filter((b) => b.held.length > 0).map((b) => b.workerId),
        ...started.map((r) => String(r.worker_id)),
      ]);
      const live = [...workers.keys()];
      const candidates = live.filter((id) => busy.has(id));
      const victim = rng.pick(candidates.length > 0 ? candidates : live) as string;
      if (busy.has(victim)) holding++;
      await kill9(workers.get(victim) as Child);
      workers.delete(victim);
      // What it was busy with may have finished before the kill; what it had started and not
      // finished when it died is read from the rows.
      const left = await rt.database.execute(
        sql`select id::text as id, attempt from operation
            where status = 'IN_PROGRESS' and worker_id = ${victim}`,
      );
      stranded.push(
        ...left.map((r) => ({ id: String(r.id), attempt: Number(r.attempt), worker: victim })),
      );
      // A supervisor brings it back: under its own id (a fixed --id) or a new one.
      const id = rng.next() < 0.5 ? victim : `w-${++nextId}`;
      log.push(
        `after ${moment}: killed ${victim}${busy.has(victim) ? ' (holding work)' : ''}${left.length > 0 ? ` with ${left.length} IN_PROGRESS` : ''}, started ${id}`,
      );
      // The next kill waits for it: two workers at least are alive or starting at any time.
      await supervised(id);
    }

    const archived = async () =>
      (await completed()) >= OPERATIONS &&
      (await countPackageStates(rt.database)).raw_data_package.ARCHIVED === PACKAGES;
    await waitFor(archived, `${PACKAGES} packages ARCHIVED (${log.join('; ')})`, 180_000, 250);
    const context = log.join('\n');
    process.stdout.write(`${context}\n`);

    // Every package and every transfer package is ARCHIVED, as `opstate status` derives it.
    const counts = await countPackageStates(rt.database);
    expect(counts.raw_data_package.ARCHIVED, context).toBe(PACKAGES);
    expect(counts.data_transfer_package.ARCHIVED, context).toBe(BUNDLES);
    expect((await listPackagesInState(rt.database, 'ARCHIVED', { limit: 1000 })).rows).toHaveLength(
      PACKAGES + BUNDLES,
    );
    // One operation per (kind, subject, location), as many as each stage should have, each
    // along a lifecycle path with exactly one COMPLETE, and no artifact with two live copies.
    expect(
      await pipelineOutcomeProblems(rt.database, {
        operations: OPERATIONS,
        perStage: [PACKAGES, BUNDLES, BUNDLES, BUNDLES, PACKAGES],
      }),
      context,
    ).toEqual([]);
    // The run did what it claims: every kill happened, and the control plane never died.
    expect(moments).toHaveLength(KILLS);
    expect(dep.children.filter((c) => c.proc.signalCode === 'SIGKILL')).toHaveLength(KILLS);
    expect(plane.proc.exitCode, context).toBeNull();
    // And what the kills cost was taken back: every attempt a dead worker had started and not
    // finished was reset, in its own operation's history. (A worker shown busy may have finished
    // its work by the kill and strand nothing: the rows say what each kill did strand.)
    const resets = await rt.database.execute(sql`
      select by, count(*)::int as n from operation_transition where event = 'RESET' group by by`);
    process.stdout.write(
      `${holding} of ${KILLS} kills hit a busy worker, ${stranded.length} attempts left IN_PROGRESS; resets: ${resets.map((r) => `${r.by} ${r.n}`).join(', ')}\n`,
    );
    // The one other way an attempt read IN_PROGRESS after the kill can end: the dead worker's
    // last statement, sent before the kill, committed after the read (the server finishes a
    // statement whose client is gone). That attempt was not stranded; it ended by its own worker.
    const notReset: string[] = [];
    for (const s of stranded) {
      const [ended] = await rt.database.execute(sql`
        select 1 from operation_transition
        where operation_id = ${s.id}::uuid and attempt = ${s.attempt}
          and (event = 'RESET' or (event in ('COMPLETE', 'FAIL') and by = ${s.worker}))`);
      if (ended === undefined) notReset.push(`${s.id}@${s.attempt}`);
    }
    expect(notReset, context).toEqual([]);
  }, 300_000);
});
