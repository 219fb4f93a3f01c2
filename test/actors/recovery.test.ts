import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import {
  archiveOperation,
  type Deployment,
  deploymentPerTest,
  FAST_TIMING,
  kill9,
  waitFor,
} from './harness.ts';

/**
 * Recovery drills on the real Postgres and NATS JetStream with workers as real child processes:
 * each recovery path is made to happen, and the outcome is one COMPLETED operation with exactly
 * one live output copy and a transition history that names who recovered it.
 */
const deploy = deploymentPerTest();

const status = async (dep: Deployment, id: string) => (await dep.runtime.store.load(id)).status;

async function liveCopiesAt(dep: Deployment, pkg: string, locationId: string) {
  const copies = await dep.runtime.artifacts.copiesOf('raw_data_package', pkg);
  return copies.filter((c) => c.locationId === locationId && c.status !== 'DELETED');
}

/**
 * The shape of the crash drills: a worker that dies at `crash` leaves the operation in
 * `leftIn`; a healthy worker then starts, and the operation must come home within `withinMs`.
 */
async function crashThenRecover(
  dep: Deployment,
  crash: 'before-start' | 'after-start',
  leftIn: 'SCHEDULED' | 'IN_PROGRESS',
  withinMs: number,
) {
  const doomed = await dep.readyWorker({ FIXTURE_CRASH: crash });
  const op = await archiveOperation(dep);
  await doomed.exited;
  expect(await status(dep, op.id)).toBe(leftIn);
  // The dead worker's last heartbeat covered the operation: that is what the monitor goes by.
  const beats = await dep.runtime.transport.heartbeats.list();
  expect(beats.filter((b) => b.held.some((h) => h.operationId === op.id))).toHaveLength(1);
  await dep.readyWorker();
  await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'recovery', withinMs);
  return { op, view: await dep.runtime.get(op.id) };
}

describe('recovery paths', () => {
  it('kill -9 mid-operation: the heartbeat monitor resets it and it completes once', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    const op = await archiveOperation(dep);
    const first = dep.spawnWorker({ FIXTURE_HOLD_MS: '600000' });
    await waitFor(
      async () => (await status(dep, op.id)) === 'IN_PROGRESS',
      'first worker to start',
      30_000,
    );
    // Killed once attempt 1 has run its first journal step (its heartbeat covers it since START).
    await waitFor(
      async () => (await dep.runtime.get(op.id)).steps.length === 1,
      'the first worker’s journal step',
    );
    // The heartbeat comes before the handler's first step: wait for the step this test checks.
    await waitFor(
      async () =>
        (await dep.runtime.get(op.id)).steps.some((s) => s.name === 'started' && s.attempt === 1),
      'the first worker to record its first step',
    );
    await kill9(first);
    await dep.readyWorker();
    await waitFor(
      async () => (await status(dep, op.id)) === 'COMPLETED',
      'completion after the crash',
      40_000,
    );

    const view = await dep.runtime.get(op.id);
    expect(
      view.transitions
        .filter((t) => t.event === 'RESET')
        .map((t) => `${t.by}@${t.attempt}: ${t.reason}`),
    ).toEqual([expect.stringMatching(/^heartbeat_monitor@1: stale heartbeat/)]);
    expect(view.attempt).toBe(2);
    expect(view.transitions.filter((t) => t.event === 'COMPLETE')).toHaveLength(1);
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(1);
    expect(view.outputs).toHaveLength(1);
    // The journal kept the first attempt's step: the re-run did not record it again; the archive
    // protocol's steps are the second attempt's.
    expect(view.steps.map((s) => [s.name, s.attempt])).toEqual([
      ['started', 1],
      ['plan', 2],
      ['upload', 2],
      ['verify', 2],
    ]);
  });

  it('a worker killed right after START is the heartbeat monitor’s case: its heartbeat covered the operation before START', async () => {
    const dep = await deploy({ ...FAST_TIMING, ackWaitMs: 20_000 });
    dep.runtime.startControlPlane();
    const { op, view } = await crashThenRecover(dep, 'after-start', 'IN_PROGRESS', 40_000);
    const resets = view.transitions.filter((t) => t.event === 'RESET');
    expect(resets.map((t) => `${t.by}@${t.attempt}`)).toEqual(['heartbeat_monitor@1']);
    expect(resets[0]?.reason).toMatch(/^stale heartbeat: running on w-\S+, whose last heartbeat/);
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(1);
  });

  it('a worker killed with a dispatch pulled and not yet started leaves it SCHEDULED; the heartbeat monitor brings it home', async () => {
    const dep = await deploy({ ...FAST_TIMING, ackWaitMs: 20_000 });
    dep.runtime.startControlPlane();
    const { view } = await crashThenRecover(dep, 'before-start', 'SCHEDULED', 40_000);
    expect(view.transitions.map((t) => `${t.from}>${t.to}:${t.by}`)).toEqual([
      `null>PENDING:${dep.runtime.serviceName}`,
      'PENDING>SCHEDULED:scheduler',
      'SCHEDULED>PENDING:heartbeat_monitor',
      'PENDING>SCHEDULED:scheduler',
      expect.stringMatching(/^SCHEDULED>IN_PROGRESS:w-/),
      expect.stringMatching(/^IN_PROGRESS>COMPLETED:w-/),
    ]);
    expect(view.transitions[2]?.reason).toMatch(/dispatch held by w-\S+, whose last heartbeat/);
  });

  it('a purged heartbeat bucket (KV and database disagree): the reconciler, not the monitor, recovers', async () => {
    // The broker's ack-wait is far away, so only the reconciler can recover within the test.
    const dep = await deploy({ ...FAST_TIMING, ackWaitMs: 30_000 });
    dep.runtime.startControlPlane();
    const first = await dep.readyWorker({ FIXTURE_HOLD_MS: '600000' });
    const op = await archiveOperation(dep);
    await waitFor(
      async () =>
        (await status(dep, op.id)) === 'IN_PROGRESS' &&
        (await dep.runtime.transport.heartbeats.isAlive(OperationKind.LONG_TERM_ARCHIVE, op.id)),
      'the first worker to run it, covered by its heartbeat',
      30_000,
    );
    await kill9(first);
    const js = jetstream((dep.runtime.transport as JetStreamTransport).connection);
    const kv = await new Kvm(js).open(`${dep.prefix}_heartbeats`);
    for await (const key of await kv.keys()) await kv.purge(key);
    expect(await dep.runtime.transport.heartbeats.list()).toEqual([]);
    await dep.readyWorker();
    await waitFor(
      async () => (await status(dep, op.id)) === 'COMPLETED',
      'completion after the floor',
      40_000,
    );
    const view = await dep.runtime.get(op.id);
    // On a mismatch, show what the control plane logged: a failing loop would explain it.
    expect({
      resets: view.transitions.filter((t) => t.event === 'RESET').map((t) => t.by),
      log: dep.logger.lines.filter((l) => l.level !== 'INFO' && l.level !== 'DEBUG'),
    }).toEqual({ resets: ['reconciler'], log: expect.any(Array) });
    const warnings = dep.logger.lines.filter(
      (l) => l.level === 'WARNING' && l.message === 'reconciler reset operation',
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.fields).toMatchObject({
      operationId: op.id,
      status: 'IN_PROGRESS',
      attempt: 1,
    });
    expect(String(warnings[0]?.fields.reason)).toMatch(/no live worker holding it/);
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(1);
  });

  it('a stale attempt cannot complete: after a reset, only the new attempt’s completion lands', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    const slow = await dep.readyWorker({ FIXTURE_HOLD_MS: '600000' });
    const op = await archiveOperation(dep);
    await waitFor(
      async () => (await status(dep, op.id)) === 'IN_PROGRESS',
      'the slow worker to start',
      30_000,
    );
    await dep.runtime.command(op.id, { type: 'RESET', by: 'operator', reason: 'drill' });

    // The store refuses attempt 1's completion outright, and writes no copy for it.
    await expect(
      dep.runtime.store.complete(op.id, 1, [
        { artifactType: 'raw_data_package', artifactId: op.pkg, locationId: op.archive },
      ]),
    ).rejects.toMatchObject({ code: OpstateErrorCode.STALE_ATTEMPT });
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(0);

    // The slow worker notices at its next heartbeat, aborts its handler and lets go (its heartbeat
    // heartbeat no longer lists attempt 1); it does not crash. Another worker then runs attempt 2.
    await waitFor(
      async () =>
        !(await dep.runtime.transport.heartbeats.isAlive(
          OperationKind.LONG_TERM_ARCHIVE,
          op.id,
          1,
        )),
      'the slow worker to let go of attempt 1',
      30_000,
    );
    expect(slow.proc.exitCode).toBeNull();
    await kill9(slow);
    const fresh = await dep.readyWorker();
    await waitFor(
      async () => (await status(dep, op.id)) === 'COMPLETED',
      'attempt 2 to complete',
      30_000,
    );
    const view = await dep.runtime.get(op.id);
    // The slow worker may have taken attempt 2 before it was killed; recovery then made a 3rd.
    expect(view.attempt).toBeGreaterThanOrEqual(2);
    const resets = view.transitions.filter((t) => t.event === 'RESET').map((t) => t.by);
    expect(resets[0]).toBe('operator');
    for (const by of resets.slice(1)) expect(['heartbeat_monitor', 'reconciler']).toContain(by);
    const complete = view.transitions.filter((t) => t.event === 'COMPLETE');
    expect(complete).toHaveLength(1);
    expect(complete[0]?.attempt).toBe(view.attempt);
    expect(fresh.output.join('\n')).toContain('started for');
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(1);
  });

  it('the retry cap: a retryable failure three times over goes to FAILED with one breadcrumb per attempt', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    await dep.readyWorker({ FIXTURE_FAIL: 'retryable' });
    const op = await archiveOperation(dep, 2);
    await waitFor(
      async () => (await status(dep, op.id)) === 'FAILED',
      'the retry budget to run out',
      40_000,
    );
    const view = await dep.runtime.get(op.id);
    expect(view.retryCount).toBe(2);
    expect(
      view.transitions.filter((t) => t.event === 'FAIL').map((t) => `${t.attempt}:${t.to}`),
    ).toEqual(['1:PENDING', '2:PENDING', '3:FAILED']);
    expect(view.failures.map((f) => [f.kind, f.attempt])).toEqual([
      [OperationKind.LONG_TERM_ARCHIVE, 1],
      [OperationKind.LONG_TERM_ARCHIVE, 2],
      [OperationKind.LONG_TERM_ARCHIVE, 3],
    ]);
    expect(view.lastError?.message).toBe('transient failure in attempt 3');
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(0);
  });

  it('a permanent failure is not retried', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    await dep.readyWorker({ FIXTURE_FAIL: 'permanent' });
    const op = await archiveOperation(dep);
    await waitFor(async () => (await status(dep, op.id)) === 'FAILED', 'the failure', 30_000);
    const view = await dep.runtime.get(op.id);
    expect(view.attempt).toBe(1);
    expect(view.lastError).toMatchObject({ retryable: false, code: OpstateErrorCode.BAD_INPUT });

    // Operators act through the CLI; the machine's refusal comes back as the reason.
    const cancel = dep.spawnCli(['cancel', op.id, '--reason', 'drill']);
    expect(await cancel.exited).toBe(1);
    expect(cancel.output.join('\n')).toMatch(/CANCEL is not accepted in FAILED/);
    const retry = dep.spawnCli(['retry', op.id]);
    expect(await retry.exited).toBe(0);
    expect(retry.output.join('\n')).toContain('FAILED → PENDING (attempt 2)');
    await waitFor(
      async () =>
        (await dep.runtime.store.load(op.id)).attempt === 2 &&
        (await status(dep, op.id)) === 'FAILED',
      'the retried attempt to fail again',
      30_000,
    );
  });

  it('broker redelivery of the current attempt with no live holder resets it by the broker path', async () => {
    // The monitor and the reconciler are there but sleep far longer than the test, so the
    // broker's ack-wait acts.
    const dep = await deploy({
      ...FAST_TIMING,
      monitorIntervalMs: 600_000,
      reconcilerIntervalMs: 600_000,
    });
    dep.runtime.startControlPlane();
    const { op, view } = await crashThenRecover(dep, 'after-start', 'IN_PROGRESS', 60_000);
    expect(
      view.transitions.filter((t) => t.event === 'RESET').map((t) => `${t.by}@${t.attempt}`),
    ).toEqual(['broker@1']);
    expect(await liveCopiesAt(dep, op.pkg, op.archive)).toHaveLength(1);
  });
});
