import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
} from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import type { RuntimeTiming } from '../../runtime/Runtime.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { makeWorld, type World } from '../persistence/fixtures.ts';
import { observe } from '../transport/helpers.ts';
import {
  archiveOperation,
  type Child,
  type Deployment,
  deploymentPerTest,
  FAST_TIMING,
  waitFor,
} from './harness.ts';

/**
 * A dispatch the broker handed to a worker that froze (SIGSTOP) or died before it read it: no
 * heartbeat can list it, so the heartbeat monitor asks the broker which dispatches are out and
 * unsettled, and resets it within about the heartbeat timeout instead of the reconciler's floor.
 * A worker that resumes in time runs it; one merely queued behind a busy worker is left alone.
 */
const deploy = deploymentPerTest();

const ONE_QUEUE = { FIXTURE_KINDS: 'long_term_archive' };
/** One world per deployment: its archive's site queue is the one queue the drill's workers read. */
const worlds = new Map<Deployment, Promise<World>>();
const worldOf = (dep: Deployment): Promise<World> => {
  const w = worlds.get(dep) ?? makeWorld(dep.runtime.database);
  worlds.set(dep, w);
  return w;
};
const queueOf = async (dep: Deployment) =>
  `${(await worldOf(dep)).archive.site}_lta_long_term_archive_long_term_archive_transfer`;
/** A worker for long-term archives held to the drill's site: it reads that one queue. */
const oneQueueWorker = async (
  dep: Deployment,
  env: Record<string, string> = {},
  args: string[] = [],
) =>
  dep.readyWorker({ ...ONE_QUEUE, ...env }, ['--site', (await worldOf(dep)).archive.site, ...args]);
const archiveAt = async (dep: Deployment) =>
  archiveOperation(dep, undefined, { world: await worldOf(dep) });
const status = async (dep: Deployment, id: string) => (await dep.runtime.store.load(id)).status;
const jsmOf = (dep: Deployment) =>
  jetstreamManager((dep.runtime.transport as JetStreamTransport).connection);
const queueInfo = async (jsm: JetStreamManager, dep: Deployment) =>
  jsm.consumers.info(`${dep.prefix}_dispatch`, await queueOf(dep));
/**
 * Whether the queue has a pull request open. A worker process creates no consumer: until the
 * leading control plane's routes pass has created the site queue's (within a discovery
 * interval of the world's locations), the worker waits and the queue has none.
 */
const pullOpen = async (jsm: JetStreamManager, dep: Deployment) => {
  try {
    return (await queueInfo(jsm, dep)).num_waiting > 0;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound) {
      return false;
    }
    throw err;
  }
};

/**
 * Freezes `worker` while it has a pull request open and submits an operation, until the broker
 * has handed that operation's dispatch to the frozen worker (a pull request that expired first
 * leaves the dispatch queued: the worker is woken to run it and the drill tries again).
 */
async function strandWithFrozen(dep: Deployment, worker: Child) {
  const jsm = await jsmOf(dep);
  for (let tries = 0; tries < 5; tries++) {
    await waitFor(() => pullOpen(jsm, dep), 'the queue’s consumer and an open pull request');
    worker.proc.kill('SIGSTOP');
    if ((await queueInfo(jsm, dep)).num_waiting === 0) {
      worker.proc.kill('SIGCONT');
      continue;
    }
    const op = await archiveAt(dep);
    await waitFor(async () => {
      const info = await queueInfo(jsm, dep);
      return info.num_ack_pending > 0 || (info.num_pending > 0 && info.num_waiting === 0);
    }, 'the dispatch to be handed out or left queued');
    if ((await queueInfo(jsm, dep)).num_ack_pending > 0) return op;
    worker.proc.kill('SIGCONT');
    await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'the woken worker');
  }
  throw new Error('the broker never handed a dispatch to the frozen worker');
}

/** Floor and ack-wait far beyond the drill: only the heartbeat monitor can act in time. */
const TIMING: Partial<RuntimeTiming> = {
  ...FAST_TIMING,
  reconcilerFloorMs: 120_000,
  ackWaitMs: 180_000,
};

async function recoveredByMonitor(dep: Deployment, id: string) {
  await oneQueueWorker(dep);
  await waitFor(async () => (await status(dep, id)) === 'COMPLETED', 'recovery', 40_000);
  const view = await dep.runtime.get(id);
  // A frozen worker's pull request may outlive the timeout and take the next attempt's dispatch
  // too: each is then reset the same way.
  const resets = view.transitions.filter((t) => t.event === 'RESET');
  expect(resets.map((t) => `${t.from}:${t.by}@${t.attempt}`)).toEqual(
    resets.map((_, i) => `SCHEDULED:heartbeat_monitor@${i + 1}`),
  );
  expect(resets.length).toBeGreaterThan(0);
  for (const r of resets)
    expect(r.reason).toMatch(/^stranded: dispatch handed to a worker that never listed it/);
  return view;
}

describe('a dispatch stranded with a worker that never read it', () => {
  it('the worker frozen past the heartbeat timeout: the monitor resets it, another worker completes it, the woken worker lets it go', async () => {
    const dep = await deploy(TIMING);
    dep.runtime.startControlPlane();
    const frozen = await oneQueueWorker(dep);
    const op = await strandWithFrozen(dep, frozen);
    expect(await status(dep, op.id)).toBe('SCHEDULED');
    await recoveredByMonitor(dep, op.id);
    frozen.proc.kill('SIGCONT');
    // Woken, it reads a dispatch of a superseded attempt and terminates it: nothing is pending.
    const jsm = await jsmOf(dep);
    await waitFor(async () => {
      const info = await queueInfo(jsm, dep);
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, 'the stale dispatch to be terminated');
    const after = await dep.runtime.get(op.id);
    expect(after.transitions.filter((t) => t.event === 'COMPLETE')).toHaveLength(1);
    expect(after.outputs).toHaveLength(1);
    expect(frozen.proc.exitCode).toBeNull();
  });

  it('the worker killed (SIGKILL) before reading it: the monitor resets it within about the timeout', async () => {
    const dep = await deploy(TIMING);
    dep.runtime.startControlPlane();
    const doomed = await oneQueueWorker(dep);
    const op = await strandWithFrozen(dep, doomed);
    doomed.proc.kill('SIGKILL');
    await doomed.exited;
    const view = await recoveredByMonitor(dep, op.id);
    expect(view.outputs).toHaveLength(1);
  });

  it('the worker frozen for less than the timeout runs it as soon as it resumes', async () => {
    // Frozen longer than two of its pull requests' idle heartbeats (half the 5 s expiry each):
    // the client must still take what the broker handed it during the freeze.
    const dep = await deploy({ ...TIMING, heartbeatTimeoutMs: 30_000 });
    dep.runtime.startControlPlane();
    const frozen = await oneQueueWorker(dep);
    const op = await strandWithFrozen(dep, frozen);
    await observe(6_000);
    frozen.proc.kill('SIGCONT');
    await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'completion', 30_000);
    const view = await dep.runtime.get(op.id);
    expect(view.transitions.map((t) => `${t.event}@${t.attempt}`)).toEqual([
      'CREATE@1',
      'SCHEDULE@1',
      'START@1',
      'COMPLETE@1',
    ]);
  });

  it('a dispatch merely queued behind a busy worker past the timeout is left alone', async () => {
    const dep = await deploy(TIMING);
    dep.runtime.startControlPlane();
    // One slot, busy for 1.5 heartbeat timeouts: the second dispatch waits in the queue.
    await oneQueueWorker(dep, { FIXTURE_HOLD_MS: '6000' }, ['--concurrency', '1']);
    const busy = await archiveAt(dep);
    await waitFor(async () => (await status(dep, busy.id)) === 'IN_PROGRESS', 'the busy one');
    const queued = await archiveAt(dep);
    await waitFor(async () => (await status(dep, queued.id)) === 'COMPLETED', 'both', 60_000);
    const view = await dep.runtime.get(queued.id);
    expect(view.transitions.map((t) => `${t.event}@${t.attempt}`)).toEqual([
      'CREATE@1',
      'SCHEDULE@1',
      'START@1',
      'COMPLETE@1',
    ]);
    // It waited SCHEDULED for longer than the heartbeat timeout.
    const scheduled = view.transitions.find((t) => t.event === 'SCHEDULE')?.at.getTime() ?? 0;
    const started = view.transitions.find((t) => t.event === 'START')?.at.getTime() ?? 0;
    expect(started - scheduled).toBeGreaterThan(TIMING.heartbeatTimeoutMs as number);
  });
});
