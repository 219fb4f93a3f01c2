import { describe, expect, it } from 'vitest';
import { INSECURE_NATS_WARNING } from '../../transport/jetstream/anonymousNats.ts';
import { archiveOperation, deploymentPerTest, waitFor } from './harness.ts';

/**
 * The seeds' #151: a healthy long-running archive must never be reset or redelivered. The worker
 * beats (KV put + working()) at the interval, so neither the monitor, the reconciler nor the
 * broker's ack-wait ever fires, however long the operation runs.
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
  // The archive's locations are registered after the worker starts: found within half a second.
  discoveryIntervalMs: 500,
};
const RUN_MS = 4 * TIMING.ackWaitMs;

const deploy = deploymentPerTest();

describe('a healthy long-running operation', () => {
  it(`running ${RUN_MS} ms (4 × ack-wait, over 4 × the reconciler floor) is never reset or redelivered`, async () => {
    const dep = await deploy(TIMING);
    dep.runtime.startControlPlane();
    const worker = await dep.readyWorker({ FIXTURE_HOLD_MS: String(RUN_MS) });
    const { id } = await archiveOperation(dep);
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
      'completion',
      RUN_MS + 30_000,
    );
    const view = await dep.runtime.get(id);
    expect(view.attempt).toBe(1);
    expect(view.transitions.map((t) => t.event)).toEqual([
      'CREATE',
      'SCHEDULE',
      'START',
      'COMPLETE',
    ]);
    const started = view.startedAt?.getTime() ?? 0;
    const finished = view.finishedAt?.getTime() ?? 0;
    expect(finished - started).toBeGreaterThanOrEqual(RUN_MS);
    expect(worker.output.join('\n')).not.toContain(
      'redelivery of an operation this worker is running',
    );
    // The one WARNING expected is the test server's: it accepts anonymous clients, and the suite
    // runs on it by choice (OPSTATE_NATS_INSECURE=1).
    expect(
      dep.logger.lines.filter((l) => l.level === 'WARNING' && l.message !== INSECURE_NATS_WARNING),
    ).toEqual([]);
  }, 120_000);
});
