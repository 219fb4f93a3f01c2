import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeWorld } from '../persistence/fixtures.ts';
import { archiveOperation, deploymentPerTest, waitFor } from './harness.ts';

/**
 * The priority drill on the real Postgres and NATS JetStream with a worker as a real child
 * process: a limit of 1 on the archive location saturates its route, and archives of a higher
 * priority submitted while the first runs start before the lower ones submitted earlier. The
 * handler holds every attempt until the drill writes a file, so the route is full when the late
 * ones arrive, whatever the machine's speed.
 */
const deploy = deploymentPerTest();
const folders: string[] = [];
afterEach(() => {
  for (const f of folders.splice(0)) rmSync(f, { recursive: true, force: true });
});

describe('priorities with a real worker', () => {
  it('with the route saturated, higher-priority archives submitted later start before the lower ones', async () => {
    const dep = await deploy();
    const { runtime } = dep;
    const w = await makeWorld(runtime.database);
    await runtime.limits.set({ location: w.archive.id, max: 1 });
    const folder = mkdtempSync(join(tmpdir(), 'opstate-priority-'));
    folders.push(folder);
    const gate = join(folder, 'go');

    const low: string[] = [];
    for (let n = 0; n < 4; n++) low.push((await archiveOperation(dep, undefined, { world: w })).id);
    await dep.readyWorker({ FIXTURE_HOLD_UNTIL_FILE: gate });
    runtime.startControlPlane();
    const live = async () => {
      const rows = await runtime.database.execute<{ id: string }>(
        `select id from operation where status in ('SCHEDULED', 'IN_PROGRESS')`,
      );
      return rows.map((r) => r.id);
    };
    // The first low one runs and holds the location's only slot.
    await waitFor(
      async () => {
        const [row] = await runtime.database.execute<{ status: string }>(
          `select status from operation where id = '${low[0]}'`,
        );
        return row?.status === 'IN_PROGRESS';
      },
      'the first archive to start',
      60_000,
    );
    expect(await live()).toEqual([low[0]]);

    const high: string[] = [];
    for (let n = 0; n < 3; n++) {
      high.push((await archiveOperation(dep, undefined, { world: w, priority: 50 })).id);
    }
    writeFileSync(gate, 'go');
    await waitFor(
      async () => {
        const [row] = await runtime.database.execute<{ n: number }>(
          `select count(*)::int as n from operation where status = 'COMPLETED'`,
        );
        return Number(row?.n) === low.length + high.length;
      },
      'every archive to complete',
      120_000,
    );

    // The START order, from the history: one start each (no retry), the late high ones first
    // after the one that held the slot, in their own submit order, then the low ones in theirs.
    const starts = await runtime.database.execute<{ operation_id: string }>(
      `select operation_id from operation_transition where to_status = 'IN_PROGRESS' order by id`,
    );
    expect(starts.map((s) => s.operation_id)).toEqual([low[0], ...high, ...low.slice(1)]);
  });
});
