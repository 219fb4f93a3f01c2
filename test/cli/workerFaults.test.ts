import { describe, expect, it } from 'vitest';
import { archiveOperation, deploymentPerTest, HANDLERS, waitFor } from '../actors/harness.ts';

const deploy = deploymentPerTest();

describe('opstate worker and a handlers module that exports faults', () => {
  it('ignores them without --faults: the worker says so and completes the work', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    // The fixture's faults would SIGKILL the worker before START.
    const worker = dep.spawnCli(['worker', '--kinds', 'all', '--handlers', HANDLERS], {
      FIXTURE_CRASH: 'before-start',
    });
    await waitFor(() => worker.printed('started for'), 'the worker process to start', 60_000);
    expect(worker.printed('ignored without --faults')).toBe(true);
    const { id } = await archiveOperation(dep);
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
      'the operation to complete on the worker that ignored the fault',
      30_000,
    );
    expect(worker.proc.exitCode).toBeNull();
    expect(worker.proc.signalCode).toBeNull();
  });

  it('honours them with --faults: the same worker dies at the fault point', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    const worker = await dep.readyWorker({ FIXTURE_CRASH: 'before-start' });
    await archiveOperation(dep);
    expect(await worker.exited).toBeNull();
    expect(worker.proc.signalCode).toBe('SIGKILL');
  });
});
