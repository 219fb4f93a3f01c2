import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { Rng } from '../../chaos/rng.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { through } from '../actors/drillChecks.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from '../actors/harness.ts';
import { handlersModule, REPO_ROOT } from '../helpers/opstateCli.ts';
import {
  declareFilesComplete,
  pipelineOutcomeProblems,
  registerBundles,
  writePipelineModule,
} from '../helpers/pipelineOperations.ts';
import { PrivatePostgres } from '../helpers/privateServers.ts';

/**
 * The default pipeline with Postgres crashing under it (each package's files declared complete,
 * nothing submitted): a control plane running the pipeline's pass and two workers running the
 * reference stage handlers, as processes, on a Postgres of the drill's own. After seeded numbers
 * of completions, the pass's next write is held inside its transaction (a trigger of the drill's
 * sleeps once the operations it creates are inserted, before the facts are consumed, the cursor
 * moves and it commits), and Postgres is crashed right there (every server process SIGKILLed,
 * then started on its data) or restarted `immediate`. The pass writes what it creates with its
 * cursor's advance in one transaction: the crash leaves none of it, and the completions and facts
 * are read again. In the end every package is ARCHIVED, each (kind, subject, location) has one
 * operation, each operation one COMPLETE along a lifecycle path, and no process exited.
 *
 * `OPSTATE_DRILL_SEED` replays a run's choice of moments.
 */
const deploy = deploymentPerTest();
let pg: PrivatePostgres | undefined;
let dir: string | undefined;
afterAll(async () => {
  await pg?.dispose();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const BUNDLES = 2;
const PER_BUNDLE = 5;
const PACKAGES = BUNDLES * PER_BUNDLE;
/** Packaging and archive per package; bundling, transfer and unpack per bundle. */
const OPERATIONS = 2 * PACKAGES + 3 * BUNDLES;
const CRASHES = 3;
const STAGE_HANDLERS = handlersModule(join(REPO_ROOT, 'stages', 'handlers.ts'));

describe('the default pipeline with Postgres crashing under it', () => {
  it('archives every package, each stage created once, and no process exits', async () => {
    const seed = Number(process.env.OPSTATE_DRILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
    process.stdout.write(`pipeline Postgres crash drill: seed ${seed}\n`);
    pg = await PrivatePostgres.create();
    await pg.start();
    const cluster = pg;
    // Floor and ack-wait beyond the drill: an operation that needed them after a crash fails it.
    const dep = await deploy(
      { ...FAST_TIMING, maxScheduled: 16, reconcilerFloorMs: 90_000, ackWaitMs: 120_000 },
      { databaseUrl: cluster.url() },
    );
    const rt = dep.runtime;
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-pg-'));
    const site = `pgcrash-${randomUUID().slice(0, 8)}`;
    const module = await writePipelineModule(dir, site);
    const worlds = await registerBundles(rt.artifacts, join(dir, 'storage'), {
      site,
      bundles: BUNDLES,
      perBundle: PER_BUNDLE,
    });
    const plane = dep.spawnCli(['control-plane', '--pipeline', module]);
    const workers = ['w-1', 'w-2'].map((id) =>
      dep.spawnCli(['worker', '--kinds', 'all', '--handlers', STAGE_HANDLERS, '--id', id]),
    );
    await waitFor(
      () => workers.every((w) => w.printed('started for')),
      'the workers to start',
      60_000,
    );
    await declareFilesComplete(rt.artifacts, worlds);

    const completed = async () => {
      const [row] = await through(() =>
        rt.database.execute(
          sql`select count(*) filter (where status = 'COMPLETED')::int as n from operation`,
        ),
      );
      return Number(row?.n);
    };
    // The drill's pause inside the pass's write: when armed, marking a created operation with its
    // pipeline subject (after the pass inserted what it creates, before it consumes the facts,
    // moves its cursor and commits) sleeps, and Postgres is crashed right there.
    await rt.database.execute(
      sql.raw(`
      create table drill_pause (armed boolean not null);
      insert into drill_pause values (false);
      create function drill_pause() returns trigger language plpgsql set search_path from current
      as $$ begin
        if new.pipeline_subject_id is not null and old.pipeline_subject_id is null
          and (select armed from drill_pause) then perform pg_sleep(120); end if;
        return new;
      end $$;
      create trigger drill_pause before update of pipeline_subject_id on operation
        for each row execute function drill_pause();`),
    );
    const armed = (on: boolean) =>
      through(() => rt.database.execute(sql`update drill_pause set armed = ${on}`));
    const pausedInWrite = async () => {
      const [row] = await through(() =>
        rt.database.execute(sql`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event = 'PgSleep'`),
      );
      return Number(row?.n) > 0;
    };
    // Crash moments spread over the run by the seed: the pass's next write after k completions.
    // The last write (the last bundle's archives) follows its unpack, which completes after every
    // packaging and every bundle's bundling, transfer and unpack: k below that count, with room
    // for a few completions between the poll that sees k and the arming.
    const lastWriteAfter = PACKAGES + 3 * BUNDLES;
    const moments = new Rng(seed)
      .shuffle(Array.from({ length: lastWriteAfter - 4 }, (_, i) => i + 1))
      .slice(0, CRASHES)
      .sort((a, b) => a - b);
    const log = [`seed ${seed}`, `crashes after ${moments.join(', ')} completions`];
    for (const [i, moment] of moments.entries()) {
      await waitFor(
        async () => (await completed()) >= moment,
        `${moment} completions`,
        120_000,
        50,
      );
      await armed(true);
      await waitFor(pausedInWrite, `the pass's write after ${moment} completions`, 120_000, 50);
      // Disarmed in a transaction of its own: the paused write sleeps on and dies with the crash.
      await armed(false);
      if (i % 2 === 0) {
        await cluster.kill();
        await cluster.start();
      } else {
        await cluster.restart('immediate');
      }
      log.push(
        `after ${moment}, inside the pass's write: ${i % 2 === 0 ? 'killed (SIGKILL) and started' : 'restarted immediate'}`,
      );
    }
    const context = log.join('\n');
    await waitFor(
      async () =>
        (await completed()) >= OPERATIONS &&
        (await through(() => countPackageStates(rt.database))).raw_data_package.ARCHIVED ===
          PACKAGES,
      `${PACKAGES} packages ARCHIVED (${context})`,
      180_000,
      250,
    );
    process.stdout.write(`${context}\n`);

    // The reconciler's floor is beyond the drill: no operation needed it.
    expect(
      await pipelineOutcomeProblems(rt.database, {
        operations: OPERATIONS,
        perStage: [PACKAGES, BUNDLES, BUNDLES, BUNDLES, PACKAGES],
        forbidden: ['reconciler'],
      }),
      context,
    ).toEqual([]);
    for (const c of [plane, ...workers]) {
      expect(c.proc.exitCode, context).toBeNull();
      expect(c.proc.signalCode, context).toBeNull();
    }
    // The crashes hit the processes: at least one of them saw the database go and waited.
    expect(
      [plane, ...workers].some(
        (c) =>
          c.printed('cannot reach the database or broker; backing off') ||
          c.printed('leadership cannot reach the database') ||
          c.printed('unreachable; waiting'),
      ),
      context,
    ).toBe(true);
  }, 300_000);
});
