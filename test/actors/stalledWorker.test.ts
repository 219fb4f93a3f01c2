import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { inputFor, makeWorld } from '../persistence/fixtures.ts';
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
 * A worker that stalls (SIGSTOP) holding a dispatch it pulled and has not started: the heartbeat
 * monitor finds it in the worker's last heartbeat and brings it home within about the timeout —
 * not the reconciler floor — while a worker that resumes in time simply runs it.
 */
const deploy = deploymentPerTest();

/** The process state letter from /proc (`T` when stopped). */
async function readProcState(child: Child): Promise<string> {
  const stat = await readFile(`/proc/${child.proc.pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

const status = async (dep: Deployment, id: string) => (await dep.runtime.store.load(id)).status;

/** Waits until `worker`'s heartbeat lists the operation (it pulled it and stopped itself). */
async function heldBy(dep: Deployment, worker: Child, id: string) {
  const workerId = worker.proc.spawnargs[worker.proc.spawnargs.indexOf('--id') + 1];
  await waitFor(
    async () =>
      (await dep.runtime.transport.heartbeats.list()).some(
        (b) => b.workerId === workerId && b.held.some((h) => h.operationId === id),
      ),
    'the stalled worker’s heartbeat to list the operation',
    30_000,
  );
}

describe('a stalled worker', () => {
  it('frozen past the heartbeat timeout with a dispatch pulled: the monitor resets it, another worker completes it, the woken worker lets it go', async () => {
    // Floor and ack-wait far beyond the test: only the monitor can bring it home in time.
    const dep = await deploy({ ...FAST_TIMING, reconcilerFloorMs: 120_000, ackWaitMs: 180_000 });
    dep.runtime.startControlPlane();
    const frozen = await dep.readyWorker({ FIXTURE_STALL: 'before-start' });
    const op = await archiveOperation(dep);
    await heldBy(dep, frozen, op.id);
    expect(await status(dep, op.id)).toBe('SCHEDULED');
    const healthy = await dep.readyWorker();
    await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'recovery', 40_000);
    const view = await dep.runtime.get(op.id);
    const resets = view.transitions.filter((t) => t.event === 'RESET');
    expect(resets.map((t) => `${t.from}:${t.by}@${t.attempt}`)).toEqual([
      'SCHEDULED:heartbeat_monitor@1',
    ]);
    expect(resets[0]?.reason).toMatch(/dispatch held by w-\S+, whose last heartbeat was \d+ s ago/);

    frozen.proc.kill('SIGCONT');
    // Woken, it finds its attempt superseded and lets go: its heartbeat no longer lists it.
    await waitFor(
      async () =>
        !(await dep.runtime.transport.heartbeats.list()).some((b) =>
          b.held.some((h) => h.operationId === op.id),
        ),
      'the woken worker to let go of attempt 1',
    );
    const after = await dep.runtime.get(op.id);
    expect(after.transitions.filter((t) => t.event === 'COMPLETE')).toHaveLength(1);
    expect(after.outputs).toHaveLength(1);
    expect([frozen.proc.exitCode, healthy.proc.exitCode]).toEqual([null, null]);
  });

  it('frozen mid-handler past the heartbeat timeout: woken, it runs no further step for the attempt given to another worker', async () => {
    const dep = await deploy({ ...FAST_TIMING, reconcilerFloorMs: 120_000, ackWaitMs: 180_000 });
    dep.runtime.startControlPlane();
    const markers = await mkdtemp(join(tmpdir(), 'opstate-stale-writer-'));
    try {
      const frozen = await dep.readyWorker({
        FIXTURE_STALL: 'mid-handler',
        FIXTURE_MARKER_DIR: markers,
      });
      const op = await archiveOperation(dep);
      await waitFor(
        async () =>
          frozen.proc.signalCode === null && (await dep.runtime.get(op.id)).steps.length === 1,
        'the frozen worker to record its first step',
        30_000,
      );
      await waitFor(async () => (await readProcState(frozen)) === 'T', 'the worker to stop itself');
      // The next attempt runs on a healthy worker, which waits before its own write step.
      await dep.readyWorker({ FIXTURE_MARKER_DIR: markers, FIXTURE_HOLD_BEFORE_WRITE_MS: '6000' });
      await waitFor(
        async () => {
          const now = await dep.runtime.store.load(op.id);
          return now.status === 'IN_PROGRESS' && now.attempt === 2;
        },
        'attempt 2 to run on the healthy worker',
        40_000,
      );
      frozen.proc.kill('SIGCONT');
      // Woken past its timeout, it lets go of attempt 1 (its heartbeat no longer lists it)…
      const frozenId = frozen.proc.spawnargs[frozen.proc.spawnargs.indexOf('--id') + 1];
      await waitFor(
        async () =>
          !(await dep.runtime.transport.heartbeats.list()).some(
            (b) => b.workerId === frozenId && b.held.some((h) => h.operationId === op.id),
          ),
        'the woken worker to let go of attempt 1',
      );
      await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'attempt 2', 30_000);
      // …without running the step it was about to: attempt 1 wrote nothing.
      expect(await readdir(markers)).toEqual(['attempt-2']);
      const view = await dep.runtime.get(op.id);
      // (plan, upload and verify: attempt 2's archive protocol; attempt 1 never reached it.)
      expect(view.steps.map((s) => `${s.name}@${s.attempt}`).sort()).toEqual([
        'plan@2',
        'started@1',
        'upload@2',
        'verify@2',
        'write@2',
      ]);
      expect(frozen.printed('worker let go of an operation that moved on')).toBe(true);
      expect(frozen.proc.exitCode).toBeNull();
    } finally {
      await rm(markers, { recursive: true, force: true });
    }
  });

  it('frozen for less than the heartbeat timeout: it runs the dispatch it held as soon as it resumes', async () => {
    // A timeout far above the freeze, so a busy machine cannot turn the pause into a death.
    const dep = await deploy({
      ...FAST_TIMING,
      heartbeatTimeoutMs: 20_000,
      reconcilerFloorMs: 60_000,
      ackWaitMs: 90_000,
    });
    dep.runtime.startControlPlane();
    const frozen = await dep.readyWorker({ FIXTURE_STALL: 'before-start' });
    const op = await archiveOperation(dep);
    await heldBy(dep, frozen, op.id);
    await observe(1_000);
    frozen.proc.kill('SIGCONT');
    await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'completion', 30_000);
    const view = await dep.runtime.get(op.id);
    expect(view.attempt).toBe(1);
    expect(view.transitions.map((t) => t.event)).toEqual([
      'CREATE',
      'SCHEDULE',
      'START',
      'COMPLETE',
    ]);
  });
});

describe('the worker’s in-flight bound', () => {
  it('--concurrency bounds what one worker process holds across all its queues', async () => {
    const dep = await deploy({ ...FAST_TIMING, maxScheduled: 64 });
    dep.runtime.startControlPlane();
    const kinds = [
      OperationKind.LONG_TERM_ARCHIVE,
      OperationKind.TRANSFER,
      OperationKind.UNPACK,
      OperationKind.STAGING,
    ];
    // Two sites, registered before the worker starts (it finds their queues at start), and a
    // worker of the four kinds only: a dozen queues for its two slots to take turns over. Each
    // kind's output is its own (artifact, location) pair, so one world takes one of each kind.
    const worlds = [await makeWorld(dep.runtime.database), await makeWorld(dep.runtime.database)];
    const worker = await dep.readyWorker(
      { FIXTURE_HOLD_MS: '1500', FIXTURE_KINDS: kinds.join(',') },
      ['--concurrency', '2'],
    );
    const ids: string[] = [];
    for (const kind of kinds) {
      for (const world of worlds) ids.push(await dep.runtime.submit(inputFor(kind, world)));
    }
    let most = 0;
    await waitFor(
      async () => {
        const counts = await dep.runtime.store.countByKindAndStatus();
        const running = Object.values(counts).reduce((n, c) => n + c.IN_PROGRESS, 0);
        const held = (await dep.runtime.transport.heartbeats.list()).reduce(
          (n, b) => n + b.held.length,
          0,
        );
        most = Math.max(most, running, held);
        const done = Object.values(counts).reduce((n, c) => n + c.COMPLETED, 0);
        return done === ids.length;
      },
      'every operation to complete',
      60_000,
      50,
    );
    expect(most).toBe(2);
    const help = dep.spawnCli(['worker', '--help']);
    expect(await help.exited).toBe(0);
    expect(help.output.join('\n')).toMatch(
      /--concurrency <n>\s+operations this worker process holds at once,\s+across\s+all its/,
    );
    expect(worker.proc.exitCode).toBeNull();
  });
});
