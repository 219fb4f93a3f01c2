import { afterEach, describe, expect, it } from 'vitest';
import { memoryLogger } from '../../actors/Logger.ts';
import { createRuntime } from '../../actors/Runtime.ts';
import { observe } from '../transport/helpers.ts';
import {
  archiveOperation,
  type Deployment,
  FAST_TIMING,
  kill9,
  NATS_URL,
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

describe('leadership when the leader loses its database connection', () => {
  it('the leader steps down and the follower takes over; the loops never stay with a leader that lost its lock', async () => {
    d = await startDeployment();
    const dep = d;
    const other = await createRuntime({
      databaseUrl: dep.db.url,
      natsUrl: NATS_URL,
      prefix: dep.prefix,
      timing: dep.timing,
      logger: memoryLogger(),
    });
    try {
      const first = dep.runtime.startControlPlane();
      await waitFor(() => first.isLeader, 'the first control plane to lead');
      const second = other.startControlPlane();
      await observe(4 * (FAST_TIMING.leaderPollMs ?? 250));
      expect(second.isLeader).toBe(false);

      // Postgres drops the leader's session, and with it the advisory lock.
      const killed = await dep.runtime.database.execute<{ pid: number }>(
        `select pg_terminate_backend(l.pid) as killed, l.pid from pg_locks l
         join pg_stat_activity a on a.pid = l.pid
         where l.locktype = 'advisory' and l.granted and a.datname = current_database()`,
      );
      expect(killed).toHaveLength(1);
      await waitFor(() => second.isLeader, 'the follower to take over');
      await waitFor(() => !first.isLeader, 'the old leader to step down');
      // The old leader contends again and stays a follower while the new one holds the lock.
      await observe(4 * (FAST_TIMING.leaderPollMs ?? 250));
      expect([first.isLeader, second.isLeader]).toEqual([false, true]);
    } finally {
      await other.close();
    }
  });
});
