import { describe, expect, it } from 'vitest';
import {
  archiveOperation,
  type Child,
  type Deployment,
  deploymentPerTest,
  FAST_TIMING,
  waitFor,
} from './harness.ts';

/**
 * A handler that never returns inside a live worker (an S3 or tape call that hangs): its worker
 * goes on beating and listing the operation, so neither the heartbeat monitor nor the reconciler
 * would ever take it back. Its deadline does: the worker aborts the handler's signal, the control
 * plane resets the attempt by `deadline`, and the next attempt completes, once.
 */
const deploy = deploymentPerTest();

// Far longer than the next attempt's own work (the archive protocol on a stand-in package, with its
// record and read-back: 0.1-0.2 s here) on a loaded machine. The drill once saw the second attempt
// reset as well: the worker's beat had read the first attempt's lease, found it moved on, and its
// abort reached the second attempt, started since under the same operation id (aborts and releases
// are now fenced on the attempt; test/actors/workerDecisions.test.ts).
const DEADLINE_MS = 15_000;

const workerIdOf = (child: Child) => child.proc.spawnargs[child.proc.spawnargs.indexOf('--id') + 1];

const status = async (dep: Deployment, id: string) => (await dep.runtime.store.load(id)).status;

describe('a handler that never returns', () => {
  it('is aborted at its deadline and reset by the deadline path though its worker beats on; the next attempt completes it once', async () => {
    // Floor and ack-wait far beyond the test, and a worker that beats: only the deadline path
    // can bring the operation home in time.
    const dep = await deploy({ ...FAST_TIMING, reconcilerFloorMs: 120_000, ackWaitMs: 180_000 });
    dep.runtime.startControlPlane();
    // Two slots: the hung handler keeps one, the next attempt runs in the other.
    const worker = await dep.readyWorker({ FIXTURE_HANG: 'first-attempt' }, ['--concurrency', '2']);
    const op = await archiveOperation(dep, undefined, { deadlineMs: DEADLINE_MS });
    await waitFor(async () => (await status(dep, op.id)) === 'COMPLETED', 'completion', 60_000);

    const view = await dep.runtime.get(op.id);
    const id = workerIdOf(worker);
    expect(
      view.transitions.map((t) => `${t.from}>${t.to}:${t.event}:${t.by}@${t.attempt}`),
    ).toEqual([
      `null>PENDING:CREATE:${dep.runtime.serviceName}@1`,
      'PENDING>SCHEDULED:SCHEDULE:scheduler@1',
      `SCHEDULED>IN_PROGRESS:START:${id}@1`,
      'IN_PROGRESS>PENDING:RESET:deadline@1',
      'PENDING>SCHEDULED:SCHEDULE:scheduler@2',
      `SCHEDULED>IN_PROGRESS:START:${id}@2`,
      `IN_PROGRESS>COMPLETED:COMPLETE:${id}@2`,
    ]);
    const reset = view.transitions[3];
    const start = view.transitions[2];
    expect(reset?.reason).toMatch(
      new RegExp(
        `^deadline passed: IN_PROGRESS on ${id} for \\d+\\.\\d s since its START, past its deadline of ${DEADLINE_MS / 1000} s \\(set at submit\\); reset whatever its heartbeats say$`,
      ),
    );
    // The reset came after the deadline, by the database's times of START and RESET.
    const ranMs = (reset?.at.getTime() ?? 0) - (start?.at.getTime() ?? 0);
    expect(ranMs).toBeGreaterThanOrEqual(DEADLINE_MS);
    console.log(
      `deadline drill: START → RESET ${ranMs} ms = ${(ranMs / DEADLINE_MS).toFixed(2)} × the deadline (${DEADLINE_MS} ms; target ≤ 1.2 ×)`,
    );
    // The worker aborted the handler's signal with the deadline as its reason; the handler went on
    // hanging, and nothing it could still do is written: one completion, one copy.
    await waitFor(
      () => worker.printed('fixture handler aborted: DEADLINE_PASSED deadline passed: attempt 1'),
      'the hung handler’s signal to fire',
    );
    expect(worker.printed('attempt past its deadline: aborting its handler')).toBe(true);
    expect(view.attempt).toBe(2);
    expect(view.retryCount).toBe(1);
    expect(view.outputs).toHaveLength(1);
    expect(worker.proc.exitCode).toBeNull();
  });
});
