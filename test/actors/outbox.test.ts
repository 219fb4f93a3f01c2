import { describe, expect, it } from 'vitest';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { archiveOperation, deploymentPerTest, waitFor } from './harness.ts';

const deploy = deploymentPerTest();

describe('dispatch relay', () => {
  it('publishes a dispatch committed by a scheduler that died before publishing it', async () => {
    const dep = await deploy();
    const { id } = await archiveOperation(dep);
    // The worker first: its start-up (seconds on a busy machine) must not count towards the
    // SCHEDULED row's age, or the reconciler's floor could pass before the relay runs.
    await dep.readyWorker();
    // A scheduler's claim commits SCHEDULED, the dispatch in its transition; it "dies" before
    // publishing.
    const { claimed } = await dep.runtime.store.claimDue(10);
    expect(claimed.map((c) => c.id)).toEqual([id]);
    expect((await dispatchesAhead(dep.runtime.store)).map((e) => e.operationId)).toEqual([id]);

    dep.runtime.startControlPlane();
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
      'completion',
      30_000,
    );
    const view = await dep.runtime.get(id);
    // One attempt, no reset: the relay, not the reconciler, brought the dispatch out.
    expect(view.transitions.map((t) => t.event)).toEqual([
      'CREATE',
      'SCHEDULE',
      'START',
      'COMPLETE',
    ]);
    // The relay passed it: its cursor is beyond the dispatch.
    await waitFor(
      async () => (await dispatchesAhead(dep.runtime.store)).length === 0,
      'the relay to pass the dispatch',
      30_000,
    );
  });
});
