import { describe, expect, it } from 'vitest';
import { observe } from '../transport/helpers.ts';
import {
  archiveOperation,
  type Child,
  type Deployment,
  deploymentPerTest,
  FAST_TIMING,
  kill9,
  waitFor,
} from './harness.ts';

const deploy = deploymentPerTest();

const ELECTED = 'control plane elected leader';

/** Two control-plane processes; resolves once one leads, as [leader, follower]. */
async function twoControlPlanes(dep: Deployment): Promise<[Child, Child]> {
  const a = dep.spawnCli(['control-plane']);
  const b = dep.spawnCli(['control-plane']);
  await waitFor(() => a.printed(ELECTED) || b.printed(ELECTED), 'a leader', 30_000);
  await waitFor(
    () => a.printed('waiting for leadership') && b.printed('waiting for leadership'),
    'both to run',
    30_000,
  );
  // An observation window of several lease polls: the other must stay a follower.
  await observe(4 * (FAST_TIMING.leaderPollMs ?? 250));
  const pair: [Child, Child] = a.printed(ELECTED) ? [a, b] : [b, a];
  expect(pair[1].printed(ELECTED)).toBe(false);
  return pair;
}

async function completes(dep: Deployment, what: string) {
  const { id } = await archiveOperation(dep);
  await waitFor(
    async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
    what,
    30_000,
  );
}

/** The holder `opstate status --json` names as leader (undefined when none leads). */
async function statusLeader(
  dep: Deployment,
): Promise<{ holder: string; since: string } | undefined> {
  const status = dep.spawnCli(['status', '--json']);
  // Bounded, so that a status command that never exits fails naming what every process printed.
  await waitFor(
    () => status.proc.exitCode !== null || status.proc.signalCode !== null,
    'opstate status --json to exit',
    60_000,
  );
  expect(await status.exited).toBe(0);
  const json = status.output.find((l) => l.startsWith('{')) ?? '{}';
  const { leaders } = JSON.parse(json) as {
    leaders: { name: string; holder: string; since: string; expired: boolean }[];
  };
  const lease = leaders.find((l) => l.name === dep.prefix && !l.expired);
  return lease === undefined ? undefined : { holder: lease.holder, since: lease.since };
}

const holderOf = (c: Child) =>
  /as (\S+); waiting for leadership/.exec(c.output.find((l) => l.includes(' as ')) ?? '')?.[1];

describe('leadership', () => {
  it('two control-plane processes elect one leader; killing it hands the loops to the other', async () => {
    const dep = await deploy();
    const [leader, follower] = await twoControlPlanes(dep);
    expect((await statusLeader(dep))?.holder).toBe(holderOf(leader));

    await kill9(leader);
    await waitFor(() => follower.printed(ELECTED), 'the follower to take over', 30_000);

    // The new leader schedules: an operation submitted now completes.
    await dep.readyWorker();
    await completes(dep, 'completion under the new leader');
    expect(follower.proc.exitCode).toBeNull();
    expect((await statusLeader(dep))?.holder).toBe(holderOf(follower));
  });

  it('a frozen leader (SIGSTOP) loses its lease to the standby; woken, it steps down and stays a follower', async () => {
    const dep = await deploy();
    const [leader, follower] = await twoControlPlanes(dep);
    await dep.readyWorker();
    await completes(dep, 'completion under the first leader');

    leader.proc.kill('SIGSTOP');
    try {
      await waitFor(
        () => follower.printed(ELECTED),
        'the standby to take the lapsed lease',
        30_000,
      );
      // Work goes on while the old leader is frozen: the standby schedules and recovers.
      await completes(dep, 'completion while the old leader is frozen');
      const now = await statusLeader(dep);
      expect(now?.holder).toBe(holderOf(follower));
    } finally {
      leader.proc.kill('SIGCONT');
    }
    await waitFor(
      () => leader.printed('lost its lease to another replica; stepping down'),
      'the woken leader to step down',
      30_000,
    );
    await observe(4 * (FAST_TIMING.leaderPollMs ?? 250));
    expect(leader.output.filter((l) => l.includes(ELECTED))).toHaveLength(1);
    expect((await statusLeader(dep))?.holder).toBe(holderOf(follower));
    await completes(dep, 'completion after the old leader woke');
    expect([leader.proc.exitCode, follower.proc.exitCode]).toEqual([null, null]);
  });
});
