import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { transportNames } from '../../transport/TransportNames.ts';
import { NatsClusterProcess } from '../helpers/privateServers.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { linesAbout, longest, pathProblems, submitArchives, uuids } from './drillChecks.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from './harness.ts';

/**
 * A three-node JetStream cluster of the drill's own, the dispatch stream and heartbeat bucket at
 * three replicas (the default on such a cluster), two control planes and two worker processes
 * pointed at all three nodes. While operations flow, the JetStream meta leader is killed
 * (SIGKILL), then the dispatch stream's leader, then a node that leads neither, each brought
 * back on its own store; then the stream's leader is frozen (SIGSTOP) until the others elect
 * another. Every operation completes exactly once along a path the lifecycle allows, none waits
 * for the reconciler's floor (nothing is lost), and no process exits.
 */
let cluster: NatsClusterProcess | undefined;
const deploy = deploymentPerTest();
afterAll(async () => {
  await cluster?.dispose();
});

const BATCH = 40;

describe('a three-node NATS cluster', () => {
  it('meta leader, stream leader and a follower killed, the stream leader frozen: every operation completes once', async () => {
    cluster = await NatsClusterProcess.create();
    await cluster.start();
    const nodes = cluster;
    const dep = await deploy(
      { ...FAST_TIMING, reconcilerFloorMs: 90_000, ackWaitMs: 120_000 },
      {
        natsUrl: nodes.url,
      },
    );
    const db = dep.runtime.database;
    const w = await makeWorld(db);
    const planes = [dep.spawnCli(['control-plane']), dep.spawnCli(['control-plane'])];
    const env = { FIXTURE_HOLD_MS: '20', FIXTURE_KINDS: 'long_term_archive' };
    const workers = [await dep.readyWorker(env), await dep.readyWorker(env)];
    const nc = await connect({ servers: nodes.url.split(','), maxReconnectAttempts: -1 });
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
    const stream = transportNames(dep.prefix).stream;
    try {
      await waitFor(
        async () => {
          try {
            return (await jsm.streams.info(stream)).config.num_replicas === 3;
          } catch {
            return false;
          }
        },
        'the control plane to make the dispatch stream at three replicas',
        60_000,
        200,
      );
      const completed = async (ids: readonly string[]) =>
        (
          await db.execute<{ n: number }>(
            `select count(*)::int as n from operation where id = any(${uuids(ids)}) and status = 'COMPLETED'`,
          )
        )[0]?.n ?? 0;
      const streamLeader = () => nodes.streamLeader(stream);
      const all: string[] = [];
      const phase = async (name: string, fault: () => Promise<void>, heal: () => Promise<void>) => {
        const ids: string[] = [];
        await submitArchives(dep, w, BATCH / 2, ids);
        await fault();
        await submitArchives(dep, w, BATCH / 2, ids);
        await waitFor(
          async () => (await completed(ids)) === ids.length,
          `${name}: ${BATCH} completions`,
          120_000,
          100,
        );
        await heal();
        all.push(...ids);
        console.log(
          JSON.stringify({
            drill: 'nats_cluster',
            phase: name,
            operations: ids.length,
            ...(await longest(db, ids)),
          }),
        );
      };

      await phase(
        'baseline',
        async () => {},
        async () => {},
      );

      const meta = await nodes.metaLeader();
      expect(meta).toBeDefined();
      const metaAt = nodes.indexOf(meta as string);
      await phase(
        `kill the meta leader (${meta})`,
        () => nodes.kill(metaAt),
        async () => {
          await nodes.startNode(metaAt);
        },
      );

      await waitFor(
        async () => (await streamLeader()) !== undefined,
        'a stream leader',
        60_000,
        200,
      );
      const leader = (await streamLeader()) as string;
      const leaderAt = nodes.indexOf(leader);
      await phase(
        `kill the stream leader (${leader})`,
        () => nodes.kill(leaderAt),
        () => nodes.startNode(leaderAt),
      );

      await waitFor(
        async () =>
          (await streamLeader()) !== undefined && (await nodes.metaLeader()) !== undefined,
        'both leaders',
        60_000,
        200,
      );
      const leaders = new Set([await streamLeader(), await nodes.metaLeader()]);
      const followerAt = [0, 1, 2].find((i) => !leaders.has(nodes.nameOf(i)));
      expect(followerAt).toBeDefined();
      await phase(
        `kill a follower (${nodes.nameOf(followerAt as number)})`,
        () => nodes.kill(followerAt as number),
        () => nodes.startNode(followerAt as number),
      );

      await waitFor(
        async () => (await streamLeader()) !== undefined,
        'a stream leader',
        60_000,
        200,
      );
      const frozen = (await streamLeader()) as string;
      const frozenAt = nodes.indexOf(frozen);
      await phase(
        `freeze the stream leader (${frozen}) until another is elected`,
        async () => {
          nodes.freeze(frozenAt);
          await waitFor(
            async () => {
              const now = await streamLeader();
              return now !== undefined && now !== frozen;
            },
            'the other nodes to elect a stream leader',
            // Elections took 47–53 s in runs on a loaded machine (the freeze phase's figure), so a
            // minute was too close; the phase's operations are held to their timers separately.
            180_000,
            200,
          );
        },
        async () => nodes.thaw(frozenAt),
      );

      expect(all).toHaveLength(BATCH * 5);
      const problems = await pathProblems(db, all, ['reconciler']);
      // What the processes said about an operation whose path went wrong, for the failure report.
      if (problems.length > 0)
        console.log(linesAbout([...planes, ...workers], problems).join('\n'));
      expect(problems).toEqual([]);
      const [copies] = await db.execute<{ n: number; distinct_ops: number }>(
        `select count(*)::int as n, count(distinct o.id)::int as distinct_ops
           from operation o join operation_output oo on oo.operation_id = o.id
          where o.id = any(${uuids(all)})`,
      );
      expect(copies).toEqual({ n: all.length, distinct_ops: all.length });
      for (const c of [...planes, ...workers]) {
        expect(c.proc.exitCode).toBeNull();
        expect(c.proc.signalCode).toBeNull();
      }
    } finally {
      await nc.close();
    }
  }, 600_000);
});
