import { afterAll, describe, expect, it } from 'vitest';
import { PostgresPair } from '../helpers/privateServers.ts';
import { makeWorld } from '../persistence/fixtures.ts';
import { longest, pathProblems, submitArchives, through, uuids } from './drillChecks.ts';
import { deploymentPerTest, FAST_TIMING, waitFor } from './harness.ts';

/**
 * A Postgres primary with a synchronous streaming standby of the drill's own, two control planes
 * and two worker processes pointed at both through one multi-host `DATABASE_URL`
 * (`target_session_attrs=read-write`). With a few hundred operations submitted and acknowledged,
 * some completed and the rest in flight, the primary is killed (SIGKILL to every process of it)
 * and the standby promoted (`pg_ctl promote`). Every operation acknowledged before the kill, and
 * every one submitted after the promotion, completes exactly once on the promoted server along a
 * path the lifecycle allows, none failed, each has one live copy, no write reached the standby
 * before its promotion, the control-plane lease is held there under a new term, and no process
 * exits.
 */
let pair: PostgresPair | undefined;
const deploy = deploymentPerTest();
afterAll(async () => {
  await pair?.dispose();
});

// The baseline is as large as the batch the kill meets, so that the two phases' figures differ
// by the fault alone (a larger batch waits longer behind maxScheduled by itself).
const BEFORE_KILL = 300;
const BASELINE = BEFORE_KILL;
const AFTER_PROMOTION = 40;

describe('a Postgres failover', () => {
  it('the primary killed under load, the synchronous standby promoted: every acknowledged operation completes once on it', async () => {
    pair = await PostgresPair.start({ synchronous: true });
    const servers = pair;
    const dep = await deploy(
      // The reconciler's floor is well past what the failover costs a dispatch (a few seconds),
      // and short enough that a dispatch the failover lost does not hold the drill for long.
      { ...FAST_TIMING, reconcilerFloorMs: 30_000, ackWaitMs: 120_000 },
      { databaseUrl: servers.url() },
    );
    const db = dep.runtime.database;
    const w = await makeWorld(db);
    const planes = [dep.spawnCli(['control-plane']), dep.spawnCli(['control-plane'])];
    const env = { FIXTURE_HOLD_MS: '30', FIXTURE_KINDS: 'long_term_archive' };
    const workers = [await dep.readyWorker(env), await dep.readyWorker(env)];
    const children = [...planes, ...workers];
    const completed = async (ids: readonly string[]) =>
      (
        await through(() =>
          db.execute<{ n: number }>(
            `select count(*)::int as n from operation where id = any(${uuids(ids)}) and status = 'COMPLETED'`,
          ),
        )
      )[0]?.n ?? 0;
    const report = async (phase: string, ids: readonly string[], extra = {}) =>
      console.log(
        JSON.stringify({
          drill: 'pg_failover',
          phase,
          operations: ids.length,
          ...extra,
          ...(await longest(db, ids)),
        }),
      );

    const baseline: string[] = [];
    await submitArchives(dep, w, BASELINE, baseline);
    await waitFor(
      async () => (await completed(baseline)) === BASELINE,
      `${BASELINE} completions before the fault`,
      60_000,
      100,
    );
    await report('baseline', baseline);

    const acknowledged: string[] = [];
    await submitArchives(dep, w, BEFORE_KILL, acknowledged);
    await waitFor(
      async () => (await completed(acknowledged)) >= 20,
      'the first completions of the batch the kill meets',
      60_000,
      50,
    );
    const [leaseBefore] = await db.execute<{ epoch: number }>(
      'select epoch::int from control_plane_lease',
    );
    const killedAt = Date.now();
    await servers.killPrimary();
    const inFlight =
      BEFORE_KILL - Number(await servers.standby.psql(countCompleted(db.schema, acknowledged)));
    // Promoted once the leader gave up its term (its lease ran out unrenewed), as a failover
    // that follows its detection by some seconds: leadership is contended again on the promoted
    // server, from the lease the primary acknowledged.
    await waitFor(
      () => planes.some((c) => c.printed('could not renew its lease in time; stepping down')),
      'the leader to step down for want of the database',
      30_000,
    );
    await servers.promote();
    const promotionMs = Date.now() - killedAt;
    const promotedAt = await servers.standby.psql('select now()');

    const after: string[] = [];
    await submitArchives(dep, w, AFTER_PROMOTION, after);
    const all = [...acknowledged, ...after];
    await waitFor(
      async () => (await completed(all)) === all.length,
      `the ${all.length} operations of the fault to complete`,
      90_000,
      100,
    );
    // How long the promoted server waited for its first transition (the runtime's reconnection).
    const [resumed] = await db.execute<{ ms: number }>(
      `select round(extract(epoch from min(at) - '${promotedAt}'::timestamptz) * 1000)::int as ms
         from operation_transition where at > '${promotedAt}'::timestamptz`,
    );
    const [resets] = await db.execute<{ other: number; reconciler: number }>(
      `select count(*) filter (where by = 'reconciler')::int as reconciler,
              count(*) filter (where by <> 'reconciler')::int as other
         from operation_transition where operation_id = any(${uuids(all)}) and event = 'RESET'`,
    );
    await report('primary killed, standby promoted', acknowledged, {
      in_flight_at_kill: inFlight,
      resets_by_reconciler: resets?.reconciler ?? null,
      other_resets: resets?.other ?? null,
      kill_to_promoted_ms: promotionMs,
      promoted_to_first_transition_ms: resumed?.ms ?? null,
    });

    // The kill met operations in flight: acknowledged, not yet completed.
    expect(inFlight).toBeGreaterThan(0);
    const everything = [...baseline, ...all];
    expect(await pathProblems(db, baseline, ['reconciler'])).toEqual([]);
    // None waited for the reconciler's floor (resets_by_reconciler above): a worker that could not
    // read an operation while no host took writes held its dispatch and waited, where a nak with
    // a delay let the broker drop some dispatches (their operations then sat SCHEDULED until the
    // floor reset them).
    expect(await pathProblems(db, all, ['reconciler'])).toEqual([]);
    // An outage is nobody's failure: no attempt the failover met was failed (each waited it out
    // in place). A reset by the broker path remains possible: a START that committed while its
    // reply was lost to the kill is judged again, as after a restart.
    const failures = await db.execute(
      `select operation_id from operation_transition
        where operation_id = any(${uuids(all)}) and event = 'FAIL'`,
    );
    expect(failures).toEqual([]);
    // No connection reached the standby before its promotion: no write was refused as read-only.
    for (const c of children) expect(c.printed('read-only transaction')).toBe(false);
    // The promoted server itself holds them: what the runtime reads is no other server's.
    expect(Number(await servers.standby.psql(countCompleted(db.schema, everything)))).toBe(
      everything.length,
    );
    const [copies] = await db.execute<{ n: number; distinct_ops: number }>(
      `select count(*)::int as n, count(distinct oo.operation_id)::int as distinct_ops
         from operation_output oo join physical_copy c on c.id = oo.physical_copy_id
        where oo.operation_id = any(${uuids(everything)}) and c.status <> 'DELETED'`,
    );
    expect(copies).toEqual({ n: everything.length, distinct_ops: everything.length });
    // The lease moved with the database: one of the two planes holds it on the promoted server,
    // renewed since the promotion, under a term granted there after the one the primary
    // acknowledged before the kill (had that one been lost, its epoch could be granted twice, and
    // two leaders would pass the same fence).
    const [lease] = await db.execute<{ holder: string; epoch: number; renewed: boolean }>(
      `select holder, epoch::int, renewed_at > '${promotedAt}'::timestamptz and expires_at > now() as renewed
         from control_plane_lease`,
    );
    expect(lease?.renewed).toBe(true);
    expect(leaseBefore?.epoch).toBeGreaterThan(0);
    expect(lease?.epoch).toBeGreaterThan(leaseBefore?.epoch ?? Number.POSITIVE_INFINITY);
    const elected = `"holder":"${lease?.holder}","epoch":${lease?.epoch},"msg":"control plane elected leader"`;
    expect(planes.some((p) => p.printed(elected))).toBe(true);
    for (const c of children) {
      expect(c.proc.exitCode).toBeNull();
      expect(c.proc.signalCode).toBeNull();
    }
  }, 180_000);
});

/** A statement counting the COMPLETED among `ids`, for psql on one server. */
function countCompleted(schema: string, ids: readonly string[]): string {
  return `select count(*) from ${schema}.operation where id = any(${uuids(ids)}) and status = 'COMPLETED'`;
}
