import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { classifyFailure } from '../../machines/classifyFailure.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { PrivatePostgres } from '../helpers/privateServers.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { type Deployment, FAST_TIMING, startDeployment, waitFor } from './harness.ts';

/**
 * Postgres restarted (fast and immediate shutdown) under load, again and again, on a cluster of
 * the drill's own: no opstate process exits, every operation completes exactly once. Processes
 * started while the database is down wait for it.
 */
let pg: PrivatePostgres | undefined;
let d: Deployment | undefined;
afterEach(async () => {
  await d?.close();
  d = undefined;
});
afterAll(async () => {
  await pg?.dispose();
});

/** Retries `fn` through an outage (the test's own writes ride through the restarts too). */
async function through<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (classifyFailure(err) !== 'outage') throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

const RESTARTS = 6;
const N = 120;

describe('a Postgres restart', () => {
  it(`${RESTARTS} restarts (fast and immediate) under load: no process exits, all ${N} operations complete once`, async () => {
    pg = await PrivatePostgres.create();
    await pg.start();
    const cluster = pg;
    d = await startDeployment({ ...FAST_TIMING, maxScheduled: 32 }, { databaseUrl: cluster.url() });
    const dep = d;
    const w = await makeWorld(dep.runtime.database);

    // Started while the database is down: they wait, say so, and come up with it.
    await cluster.stop('fast');
    const planes = [dep.spawnCli(['control-plane']), dep.spawnCli(['control-plane'])];
    const workers = [
      dep.spawnWorker({ FIXTURE_HOLD_MS: '30' }),
      dep.spawnWorker({ FIXTURE_HOLD_MS: '30' }),
    ];
    const children = [...planes, ...workers];
    await waitFor(
      () => children.every((c) => c.printed('Postgres unreachable; waiting for it and retrying')),
      'every process to wait for the database',
      60_000,
    );
    await cluster.start();
    await waitFor(
      () =>
        workers.every((c) => c.printed('started for')) &&
        planes.every((c) => c.printed('waiting for leadership')),
      'every process to start once the database is up',
      60_000,
    );

    const ids: string[] = [];
    const submitting = (async () => {
      for (let i = 0; i < N; i += 10) {
        const batch = await Promise.all(
          Array.from({ length: 10 }, async () => {
            const pkg = await through(() =>
              dep.runtime.artifacts.addRawDataPackage({ name: `rdp-${randomUUID()}` }),
            );
            const { copy } = await through(() =>
              dep.runtime.artifacts.addCopy({
                artifactType: 'raw_data_package',
                artifactId: pkg,
                locationId: w.source.id,
              }),
            );
            return { pkg, copy: copy.id };
          }),
        );
        ids.push(
          ...(await through(() =>
            dep.runtime.store.createMany(
              batch.map((b) => ({
                kind: OperationKind.LONG_TERM_ARCHIVE,
                fields: {
                  rawDataPackageId: b.pkg,
                  sourceLocationId: w.source.id,
                  destinationLocationId: w.archive.id,
                },
                inputs: [b.copy],
              })),
            ),
          )),
        );
      }
    })();
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
    try {
      await waitFor(async () => (await completed()) === N, `${N} completions`, 120_000, 200);
    } catch (err) {
      for (const c of children)
        console.log(c.proc.spawnargs.slice(2, 3), c.output.slice(-30).join('\n'));
      console.log(await dep.runtime.store.countByKindAndStatus().catch((e) => e));
      throw err;
    }

    const [row] = await dep.runtime.database.execute<{
      completes: number;
      over: number;
      live: number;
    }>(
      `select (select count(*)::int from operation_transition where event = 'COMPLETE') as completes,
        (select count(*)::int from (select operation_id from operation_transition where event = 'COMPLETE'
          group by operation_id having count(*) > 1) x) as over,
        (select count(*)::int from physical_copy where location_id = '${w.archive.id}' and status <> 'DELETED') as live`,
    );
    expect(row).toEqual({ completes: N, over: 0, live: N });
    expect(ids).toHaveLength(N);
    for (const c of children) {
      expect(c.proc.exitCode).toBeNull();
      expect(c.output.join('\n')).not.toMatch(/TypeError|Cannot read properties of null/);
    }
    // The control plane named the outage as one, not as a lost race.
    expect(
      planes.some(
        (c) =>
          c.printed('cannot reach the database or broker; backing off') ||
          c.printed('leadership cannot reach the database'),
      ),
    ).toBe(true);
  }, 300_000);
});
