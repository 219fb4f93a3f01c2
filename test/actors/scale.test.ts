import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from './harness.ts';

const deploy = deploymentPerTest();

// Enough that four processes share the work many times over (each takes 16 at once); the scale
// itself is measured by the benches (`npm run bench -- e2e`, `inflight`), not here.
const N = 500;

describe('many operations over several worker processes', () => {
  it(`${N} archives over 4 worker processes: every one COMPLETED exactly once, one copy each`, async () => {
    // As many dispatches in flight as the workers have slots: nothing waits in the queue long.
    // On a busy machine (the whole suite beside it) a dispatch still waited over 8 s for a slot of
    // a starved worker, which the drills' 8 s reconciler floor took for abandoned work: this test
    // is about exactly-once over processes, so the reconciler waits as long as it would for work
    // a worker is merely slow to take.
    const dep = await deploy({
      ...FAST_TIMING,
      maxScheduled: 64,
      reconcilerFloorMs: 60_000,
      ackWaitMs: 90_000,
    });
    dep.runtime.startControlPlane();
    const workers = await Promise.all(
      [0, 1, 2, 3].map(() => dep.readyWorker({}, ['--concurrency', '16'])),
    );
    const w = await makeWorld(dep.runtime.database);
    // Packages and their source copies through the repository, 50 at a time.
    const made: { pkg: string; copy: string }[] = [];
    for (let i = 0; i < N; i += 50) {
      made.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(50, N - i) }, async () => {
            const pkg = await dep.runtime.artifacts.addRawDataPackage({
              name: `rdp-${randomUUID()}`,
            });
            const { copy } = await dep.runtime.artifacts.addCopy({
              artifactType: 'raw_data_package',
              artifactId: pkg,
              locationId: w.source.id,
            });
            return { pkg, copy: copy.id };
          }),
        )),
      );
    }
    const ids: string[] = [];
    for (let i = 0; i < N; i += 200) {
      ids.push(
        ...(await dep.runtime.store.createMany(
          made.slice(i, i + 200).map((m) => ({
            kind: OperationKind.LONG_TERM_ARCHIVE,
            fields: {
              rawDataPackageId: m.pkg,
              sourceLocationId: w.source.id,
              destinationLocationId: w.archive.id,
            },
            inputs: [m.copy],
          })),
        )),
      );
    }
    await waitFor(
      async () =>
        (await dep.runtime.store.countByKindAndStatus()).long_term_archive.COMPLETED === N,
      `${N} completions`,
      240_000,
      200,
    );
    const [counts] = await dep.runtime.database.execute<{
      completes: string;
      resets: string;
      ops_over_one: string;
      live: string;
      workers: string;
    }>(
      `select
         (select count(*) from operation_transition where event = 'COMPLETE') as completes,
         (select count(*) from operation_transition where event = 'RESET') as resets,
         (select count(*) from (select operation_id from operation_transition where event = 'COMPLETE'
            group by operation_id having count(*) > 1) x) as ops_over_one,
         (select count(*) from physical_copy where location_id = '${w.archive.id}' and status <> 'DELETED') as live,
         (select count(distinct "by") from operation_transition where event = 'COMPLETE') as workers`,
    );
    expect(Number(counts?.completes)).toBe(N);
    expect(Number(counts?.ops_over_one)).toBe(0);
    const resets = await dep.runtime.database.execute<{ by: string; reason: string; n: string }>(
      `select "by", reason, count(*) as n from operation_transition where event = 'RESET' group by 1, 2`,
    );
    expect(resets.map((r) => `${r.n}× ${r.by}: ${r.reason}`)).toEqual([]);
    expect(Number(counts?.live)).toBe(N);
    expect(Number(counts?.workers)).toBeGreaterThan(1); // the work really spread over processes
    const statuses = await dep.runtime.store.countByKindAndStatus();
    expect(statuses.long_term_archive).toMatchObject({
      PENDING: 0,
      SCHEDULED: 0,
      IN_PROGRESS: 0,
      FAILED: 0,
    });
    // Once the writes stop, the leader's next fold leaves one tally row per kind and status stored.
    await waitFor(
      async () => {
        const [t] = await dep.runtime.database.execute<{ rows: string; pairs: string }>(
          `select (select count(*) from operation_tally) as rows,
             (select count(*) from (select distinct kind, status from operation) p) as pairs`,
        );
        return Number(t?.rows) === Number(t?.pairs);
      },
      'the leader folding the count tally',
      30_000,
      200,
    );
    expect(workers.every((c) => c.proc.exitCode === null)).toBe(true);
  }, 300_000);
});
