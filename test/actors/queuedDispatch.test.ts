import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { INSECURE_NATS_WARNING } from '../../transport/jetstream/anonymousNats.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { archiveOperation, type Deployment, deploymentPerTest, kill9, waitFor } from './harness.ts';

/**
 * A dispatch that waits in its queue behind busy slots is not lost. On the real Postgres and NATS
 * JetStream, a worker process of one slot runs one archive until the test writes a file, and a
 * second archive's dispatch waits in the same queue for that slot, SCHEDULED for many times the
 * reconciler's floor. The reconciler finds it in the queue, read by a live worker, and leaves it:
 * it runs at its first attempt once the slot frees. When the worker is killed, nobody reads the
 * queue any more, and the reconciler resets the waiting one as it would a lost dispatch.
 */
const TIMING = {
  heartbeatIntervalMs: 200,
  heartbeatTimeoutMs: 2_000,
  reconcilerFloorMs: 3_000,
  ackWaitMs: 3_500,
  monitorIntervalMs: 200,
  reconcilerIntervalMs: 300,
  schedulerIntervalMs: 50,
  relayIntervalMs: 50,
  leaderPollMs: 250,
  leaderLeaseMs: 3_000,
  maxScheduled: 16,
  discoveryIntervalMs: 500,
};
const SPARED = 'reconciler left dispatches waiting in their queues';

const deploy = deploymentPerTest();
const folders: string[] = [];
afterEach(() => {
  for (const f of folders.splice(0)) rmSync(f, { recursive: true, force: true });
});

/** One worker of one slot holding the first of two archives; the second waits in the queue. */
async function oneRunningOneWaiting(dep: Deployment) {
  const { runtime } = dep;
  const folder = mkdtempSync(join(tmpdir(), 'opstate-queued-'));
  folders.push(folder);
  const gate = join(folder, 'go');
  const worker = await dep.readyWorker({ FIXTURE_HOLD_UNTIL_FILE: gate }, ['--concurrency', '1']);
  runtime.startControlPlane();
  const w = await makeWorld(runtime.database);
  const first = (await archiveOperation(dep, undefined, { world: w })).id;
  await waitFor(
    async () => (await runtime.store.load(first)).status === 'IN_PROGRESS',
    'the first archive to start',
    60_000,
  );
  const second = (await archiveOperation(dep, undefined, { world: w })).id;
  await waitFor(
    async () => (await runtime.store.load(second)).status === 'SCHEDULED',
    'the second archive to be dispatched',
    30_000,
  );
  return { worker, gate, first, second };
}

const sparedLines = (dep: Deployment) => dep.logger.lines.filter((l) => l.message === SPARED);

describe('a dispatch waiting in its queue for a free slot', () => {
  it('is left to wait past the reconciler floor while a live worker reads its queue, and runs at its first attempt', async () => {
    const dep = await deploy(TIMING);
    const { runtime } = dep;
    const { gate, first, second } = await oneRunningOneWaiting(dep);
    // Several passes see it past the floor and leave it.
    await waitFor(
      () => sparedLines(dep).length >= 3,
      'three reconciler passes to spare it',
      60_000,
    );
    const waiting = await runtime.store.load(second);
    expect(waiting.status).toBe('SCHEDULED');
    expect(waiting.attempt).toBe(1);
    expect(sparedLines(dep)[0]?.fields).toMatchObject({ count: 1, complete: true });

    writeFileSync(gate, 'go');
    for (const id of [first, second]) {
      await waitFor(
        async () => (await runtime.store.load(id)).status === 'COMPLETED',
        'both archives to complete',
        60_000,
      );
      const view = await runtime.get(id);
      expect(view.attempt).toBe(1);
      expect(view.transitions.map((t) => t.event)).toEqual([
        'CREATE',
        'SCHEDULE',
        'START',
        'COMPLETE',
      ]);
    }
    expect(
      dep.logger.lines.filter((l) => l.level === 'WARNING' && l.message !== INSECURE_NATS_WARNING),
    ).toEqual([]);
  }, 180_000);

  it('is reset by the reconciler once no live worker reads its queue', async () => {
    const dep = await deploy(TIMING);
    const { runtime } = dep;
    const { worker, gate, second } = await oneRunningOneWaiting(dep);
    await waitFor(() => sparedLines(dep).length >= 1, 'a reconciler pass to spare it', 60_000);
    await kill9(worker);
    await waitFor(
      async () => (await runtime.store.load(second)).attempt > 1,
      'the waiting archive to be reset',
      60_000,
    );
    const view = await runtime.get(second);
    const reset = view.transitions.find((t) => t.event === 'RESET');
    expect(reset?.by).toBe('reconciler');
    // A new worker picks up the new attempt.
    writeFileSync(gate, 'go');
    await dep.readyWorker({ FIXTURE_HOLD_UNTIL_FILE: gate });
    await waitFor(
      async () => (await runtime.store.load(second)).status === 'COMPLETED',
      'the reset archive to complete',
      60_000,
    );
  }, 180_000);
});
