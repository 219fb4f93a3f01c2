import { afterEach, describe, expect, it } from 'vitest';
import { observe } from '../transport/helpers.ts';
import {
  archiveOperation,
  type Deployment,
  FAST_TIMING,
  kill9,
  startDeployment,
  waitFor,
} from './harness.ts';

let d: Deployment | undefined;
afterEach(async () => {
  await d?.close();
  d = undefined;
});

const ELECTED = 'control plane elected leader';

describe('leadership', () => {
  it('two control-plane processes elect one leader; killing it hands the loops to the other', async () => {
    d = await startDeployment();
    const dep = d;
    const a = dep.spawnCli(['control-plane']);
    const b = dep.spawnCli(['control-plane']);
    await waitFor(() => a.printed(ELECTED) || b.printed(ELECTED), 'a leader', 30_000);
    await waitFor(
      () => a.printed('waiting for leadership') && b.printed('waiting for leadership'),
      'both to run',
      30_000,
    );
    // An observation window of several leader polls: the other must stay a follower.
    await observe(4 * (FAST_TIMING.leaderPollMs ?? 250));
    const [leader, follower] = a.printed(ELECTED) ? [a, b] : [b, a];
    expect(follower.printed(ELECTED)).toBe(false);

    await kill9(leader);
    await waitFor(() => follower.printed(ELECTED), 'the follower to take over', 30_000);

    // The new leader schedules: an operation submitted now completes.
    await dep.readyWorker();
    const { id } = await archiveOperation(dep);
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
      'completion under the new leader',
      30_000,
    );
    expect(follower.proc.exitCode).toBeNull();
  });
});
