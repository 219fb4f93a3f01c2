import { afterAll, describe, expect, it } from 'vitest';
import { dispatchesAhead } from '../helpers/dispatches.ts';
import { NatsServerProcess } from '../helpers/privateServers.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { pathProblems, submitArchives } from './drillChecks.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from './harness.ts';

/**
 * A nats-server of the drill's own killed (SIGKILL) while the scheduler is handing operations to
 * it, and started again on the same store: the dispatches committed meanwhile are published by
 * the relay from the history once it is back, no process exits, and every operation completes once
 * along a path the lifecycle allows.
 */
let nats: NatsServerProcess | undefined;
const deploy = deploymentPerTest();
afterAll(async () => {
  await nats?.dispose();
});

const N = 60;

describe('a NATS outage', () => {
  it(`the broker killed while ${N} operations are scheduled: the relay catches up and every one completes once`, async () => {
    nats = await NatsServerProcess.create();
    await nats.start();
    const server = nats;
    // The reconciler's floor and ack-wait are beyond the drill: nothing may wait for them.
    const dep = await deploy(
      { ...FAST_TIMING, reconcilerFloorMs: 90_000, ackWaitMs: 120_000, maxScheduled: 16 },
      { natsUrl: server.url },
    );
    const w = await makeWorld(dep.runtime.database);
    const plane = dep.spawnCli(['control-plane']);
    const env = { FIXTURE_HOLD_MS: '30', FIXTURE_KINDS: 'long_term_archive' };
    const workers = [await dep.readyWorker(env), await dep.readyWorker(env)];
    const children = [plane, ...workers];
    await waitFor(() => plane.printed('waiting for leadership'), 'the control plane to start');
    const count = async (status: 'COMPLETED' | 'SCHEDULED') =>
      (await dep.runtime.store.countByKindAndStatus()).long_term_archive[status];
    // Dispatches past the relay's cursor whose operation still waits for them.
    const outbox = async () =>
      (await dispatchesAhead(dep.runtime.store)).filter((e) => !e.stale).length;

    const ids: string[] = [];
    await submitArchives(dep, w, N / 2, ids);
    await waitFor(async () => (await count('COMPLETED')) >= 5, 'the first completions', 60_000);
    await server.kill();
    // While it is down the scheduler goes on claiming: what it cannot publish stays ahead of the relay.
    await submitArchives(dep, w, N / 2, ids);
    await waitFor(async () => (await outbox()) > 0, 'dispatches waiting for the relay', 30_000);
    expect(await count('COMPLETED')).toBeLessThan(N);
    await server.start();
    await waitFor(async () => (await count('COMPLETED')) === N, `${N} completions`, 90_000, 100);
    await waitFor(async () => (await outbox()) === 0, 'the relay to pass every dispatch', 30_000);

    expect(ids).toHaveLength(N);
    expect(await pathProblems(dep.runtime.database, ids, ['reconciler'])).toEqual([]);
    for (const c of children) {
      expect(c.proc.exitCode).toBeNull();
      expect(c.proc.signalCode).toBeNull();
    }
    expect(plane.output.join('\n')).toMatch(
      /could not publish|cannot reach the database or broker/,
    );
  }, 240_000);
});
