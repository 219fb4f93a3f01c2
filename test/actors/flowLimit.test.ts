import { describe, expect, it } from 'vitest';
import { makeWorld } from '../persistence/fixtures.ts';
import { archiveOperation, deploymentPerTest, waitFor } from './harness.ts';

/**
 * The flow-limit drill on the real Postgres and NATS JetStream with workers as real child
 * processes: a limit of 2 set by `opstate limit set` holds for 200 archives onto one location
 * served by three workers, sampled from the database throughout, and every archive completes.
 */
const deploy = deploymentPerTest();

describe('flow limits with real workers', () => {
  it('never more than 2 live on the location under 200 archives and 3 workers; all complete', async () => {
    const dep = await deploy();
    const { runtime } = dep;
    const w = await makeWorld(runtime.database);
    const at = `${w.archive.site}/${w.archive.name}`;
    const setter = dep.spawnCli(['limit', 'set', '--location', at, '--max', '2']);
    expect(await setter.exited, setter.output.join('\n')).toBe(0);
    expect(setter.printed('0 live of 2')).toBe(true);

    const ids: string[] = [];
    for (let n = 0; n < 200; n++) {
      ids.push((await archiveOperation(dep, undefined, { world: w })).id);
    }
    await Promise.all([
      dep.readyWorker({ FIXTURE_HOLD_MS: '30' }),
      dep.readyWorker({ FIXTURE_HOLD_MS: '30' }),
      dep.readyWorker({ FIXTURE_HOLD_MS: '30' }),
    ]);
    runtime.startControlPlane();

    const samples = { highest: 0, taken: 0 };
    const counts = async () => {
      const [row] = await runtime.database.execute(`select
          count(*) filter (where status in ('SCHEDULED', 'IN_PROGRESS'))::int as live,
          count(*) filter (where status = 'COMPLETED')::int as completed
        from operation where target_location_id = '${w.archive.id}'`);
      return { live: Number(row?.live), completed: Number(row?.completed) };
    };
    await waitFor(
      async () => {
        const { live, completed } = await counts();
        samples.highest = Math.max(samples.highest, live);
        samples.taken++;
        return completed === ids.length;
      },
      'all 200 archives to complete under the limit',
      240_000,
      10,
    );
    expect(samples.taken).toBeGreaterThan(50);
    expect(samples.highest).toBeLessThanOrEqual(2);
    expect(samples.highest).toBe(2);
    // Every archive completed once: one attempt each, one live copy per package at the archive.
    const [row] = await runtime.database.execute(`select count(*)::int as n from operation
      where target_location_id = '${w.archive.id}' and status = 'COMPLETED' and attempt = 1`);
    expect(Number(row?.n)).toBe(ids.length);
    const limits = await runtime.limits.list();
    expect(limits.find((l) => l.locationId === w.archive.id)).toMatchObject({ live: 0, max: 2 });
  });
});
