import { expect, it } from 'vitest';
import { createBreakerCommand } from '../../cli/commands/breaker.ts';
import { type CircuitBreakerStatus, createStatusCommand } from '../../cli/commands/status.ts';
import { type CircuitBreaker, createCircuitBreaker } from '../../control-plane/CircuitBreaker.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { inputFor, makeWorld, type World } from '../persistence/fixtures.ts';
import { verifiedArchiveOutput } from '../persistence/verifiedArchive.ts';

export interface BreakerBackend {
  /** The file's database, migrated. */
  database(): Database;
  /** A second handle on the same database (a new pool on Postgres; the same one on PGlite). */
  peer(): Promise<Database>;
  /**
   * Resolves once a statement of this database waits on a row lock (Postgres); at once on
   * PGlite, whose single connection runs the second claimer only after the first commits.
   */
  waitUntilBlocked(): Promise<void>;
}

const POLICY = { threshold: 3, cooldownMs: 60_000 };

/**
 * One test's deployment in miniature: a world with a second archive, a store and a breaker on a
 * manual clock. The breaker's first pass happens here, so it counts only this test's outcomes.
 */
async function setup(database: Database) {
  const clock = new SimulatedClock(Date.parse('2031-01-01T00:00:00Z'));
  const logger = memoryLogger();
  const store = new OperationStore(database, { clock });
  const w = await makeWorld(database);
  const archive2 = await w.artifacts.addLocation({
    site: w.archive.site,
    name: 'lta2',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: '/data/lta2',
  });
  let released = 0;
  const breaker: CircuitBreaker = createCircuitBreaker({
    database,
    clock,
    logger,
    policy: POLICY,
    batchSize: 1024,
    onRelease: () => released++,
  });
  await breaker.pass();
  const archiveTo = (destinationLocationId: string) => ({
    ...inputFor(OperationKind.LONG_TERM_ARCHIVE, w),
    fields: {
      rawDataPackageId: w.pkg,
      sourceLocationId: w.source.id,
      destinationLocationId,
    },
  });
  const createArchives = (destination: string, n: number) =>
    store.createMany(Array.from({ length: n }, () => archiveTo(destination)));
  /** SCHEDULE (bypassing the due selection), START, then FAIL or COMPLETE. */
  const run = async (id: string, outcome: 'fail' | 'fail-permanently' | 'complete') => {
    const { status } = await store.load(id);
    if (status === 'PENDING') await store.apply(id, { type: 'SCHEDULE' });
    const { attempt } = await store.load(id);
    await store.apply(id, { type: 'START', attempt, workerId: 'w-test' });
    // A long-term archive completes with its VERIFIED record, made through the archive protocol.
    if (outcome === 'complete')
      await store.complete(id, attempt, [await verifiedArchiveOutput(store.database, id, attempt)]);
    else {
      await store.apply(id, {
        type: 'FAIL',
        attempt,
        error: { message: `archive unreachable (${id})`, retryable: outcome === 'fail' },
      });
    }
  };
  /** Claims what is due and returns the claimed ids among `ids`. */
  const claim = async (ids: readonly string[]) => {
    const { claimed } = await store.claimDue(10_000);
    return claimed.map((c) => c.id).filter((id) => ids.includes(id));
  };
  const breakerOf = async (kind: OperationKind, locationId: string) =>
    (await new CircuitBreakerRepository(database).listNotClosed()).find(
      (b) => b.kind === kind && b.locationId === locationId,
    );
  /** Opens the breaker of (archive, w.archive) with `POLICY.threshold` failures. */
  const open = async () => {
    const failing = await createArchives(w.archive.id, POLICY.threshold);
    for (const [n, id] of failing.entries())
      await run(id, n % 2 === 0 ? 'fail' : 'fail-permanently');
    await breaker.pass();
    return failing;
  };
  return {
    clock,
    logger,
    store,
    w,
    archive2,
    breaker,
    released: () => released,
    createArchives,
    run,
    claim,
    breakerOf,
    open,
  };
}

async function captureRun(
  command: ReturnType<typeof createStatusCommand>,
  args: string[],
): Promise<{ code: number; out: string[] }> {
  const out: string[] = [];
  const code = await command.run(args, { out: (l) => out.push(l), err: (l) => out.push(l) });
  return { code, out };
}

/**
 * The breaker's behaviour on one backend, driven one pass at a time on a manual clock: what
 * opens it, what it parks (and what it does not), the probe after the cooldown, and how status
 * and the operator see it. Call inside a `describe` after the file's `beforeAll`.
 */
export function breakerSuite(backend: BreakerBackend): void {
  const db = () => backend.database();
  const shared = async (): Promise<Database> => ({ ...db(), close: async () => {} });

  it('records the target location of every kind at create: its destination, else its location', async () => {
    const store = new OperationStore(db());
    const w: World = await makeWorld(db());
    const ids = await Promise.all(OPERATION_KINDS.map((k) => store.create(inputFor(k, w))));
    const rows = await db().execute(
      `select kind, target_location_id from operation where id in (${ids.map((i) => `'${i}'`).join(', ')})`,
    );
    const byKind = Object.fromEntries(rows.map((r) => [r.kind, String(r.target_location_id)]));
    expect(byKind).toEqual({
      [OperationKind.RAW_DATA_PACKAGE]: w.source.id,
      [OperationKind.DATA_TRANSFER_PACKAGE]: w.source.id,
      [OperationKind.TRANSFER]: w.buffer.id,
      [OperationKind.UNPACK]: w.buffer.id,
      [OperationKind.LONG_TERM_ARCHIVE]: w.archive.id,
      [OperationKind.STAGING]: w.processing.id,
    });
  });

  it('fewer failures than the threshold, or a success between them, leave the breaker closed', async () => {
    const t = await setup(db());
    const [a, b, c, d] = await t.createArchives(t.w.archive.id, 4);
    await t.run(a as string, 'fail');
    await t.run(b as string, 'fail');
    await t.run(c as string, 'complete');
    await t.run(d as string, 'fail');
    await t.breaker.pass();
    expect(await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id)).toBeUndefined();
    const [row] = await db().execute(
      `select state, consecutive_failures from circuit_breaker where location_id = '${t.w.archive.id}'`,
    );
    expect(row).toMatchObject({ state: 'CLOSED', consecutive_failures: 1 });
  });

  it('a completion read in a later pass than the failures clears their count, with every other breaker clean', async () => {
    const t = await setup(db());
    // No other pair has a breaker that is not clean: the pass reads the completion's pair only
    // because this pair has failures counted.
    await db().execute('delete from circuit_breaker');
    const [a, b, c, d, e] = (await t.createArchives(t.w.archive.id, 5)) as string[];
    const counted = async () =>
      (
        await db().execute(
          `select state, consecutive_failures from circuit_breaker where location_id = '${t.w.archive.id}'`,
        )
      )[0];
    await t.run(a as string, 'fail');
    await t.run(b as string, 'fail');
    await t.breaker.pass();
    expect(await counted()).toMatchObject({ state: 'CLOSED', consecutive_failures: 2 });
    await t.run(c as string, 'complete');
    await t.breaker.pass();
    expect(await counted()).toMatchObject({ state: 'CLOSED', consecutive_failures: 0 });
    // Two more failures start a new count: with the completion missed they would have opened it.
    await t.run(d as string, 'fail');
    await t.run(e as string, 'fail');
    await t.breaker.pass();
    expect(await counted()).toMatchObject({ state: 'CLOSED', consecutive_failures: 2 });
  });

  it('threshold failures (retryable or not) open the breaker, with a WARNING, and park that pair only', async () => {
    const t = await setup(db());
    const failing = await t.open();

    const b = await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id);
    expect(b).toMatchObject({
      state: 'OPEN',
      consecutiveFailures: POLICY.threshold,
      openedAt: new Date(t.clock.now()),
      location: `${t.w.archive.site}/lta`,
      lastFailure: { message: `archive unreachable (${failing.at(-1)})`, retryable: true },
    });
    const warnings = t.logger.lines.filter((l) => l.level === 'WARNING');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toMatch(/opened/);
    expect(warnings[0]?.fields).toMatchObject({
      kind: OperationKind.LONG_TERM_ARCHIVE,
      locationId: t.w.archive.id,
      location: `${t.w.archive.site}/lta`,
      lastError: `archive unreachable (${failing.at(-1)})`,
    });

    // The failed retryable ones are PENDING again and due, like new work for the pair: all parked.
    const parked = [...(await t.createArchives(t.w.archive.id, 3)), ...failing];
    const otherLocation = await t.createArchives(t.archive2.id, 2);
    const otherKind = await t.store.create(inputFor(OperationKind.TRANSFER, t.w));
    await t.clock.advance(POLICY.cooldownMs - 1); // retry backoff over, cooldown not yet
    await t.breaker.pass();
    const claimed = await t.claim([...parked, ...otherLocation, otherKind]);
    expect(claimed.sort()).toEqual([...otherLocation, otherKind].sort());
    for (const id of parked) {
      const op = await t.store.load(id);
      expect(op.status === 'PENDING' || op.status === 'FAILED').toBe(true);
      // Nothing spent while parked: a parked operation was never scheduled again.
      expect(op.retryCount).toBeLessThanOrEqual(1);
    }
    expect(await t.claim(parked)).toEqual([]);
    expect((await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id))?.state).toBe(
      'OPEN',
    );
  });

  it('after the cooldown one probe goes through at a time, and its success closes the breaker', async () => {
    const t = await setup(db());
    await t.open();
    const parked = await t.createArchives(t.w.archive.id, 3);
    await t.clock.advance(POLICY.cooldownMs);
    await t.breaker.pass();
    expect((await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id))?.state).toBe(
      'HALF_OPEN',
    );
    expect(t.released()).toBe(1);

    const [probe, ...more] = await t.claim(parked);
    expect(more).toEqual([]);
    expect(parked).toContain(probe);
    // While the probe is live (SCHEDULED, then IN_PROGRESS), nothing else of the pair goes.
    expect(await t.claim(parked)).toEqual([]);
    await t.store.apply(probe as string, { type: 'START', attempt: 1, workerId: 'w-test' });
    await t.breaker.pass();
    expect(await t.claim(parked)).toEqual([]);

    await t.store.complete(probe as string, 1, [
      await verifiedArchiveOutput(t.store.database, probe as string),
    ]);
    await t.breaker.pass();
    expect(await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id)).toBeUndefined();
    expect(t.released()).toBe(2);
    const rest = parked.filter((id) => id !== probe);
    expect((await t.claim(parked)).sort()).toEqual(rest.sort());
  });

  it("a probe's failure re-opens the breaker for another cooldown", async () => {
    const t = await setup(db());
    await t.open();
    const parked = await t.createArchives(t.w.archive.id, 2);
    await t.clock.advance(POLICY.cooldownMs);
    await t.breaker.pass();
    const [probe] = await t.claim(parked);
    expect(probe).toBeDefined();
    await t.run(probe as string, 'fail-permanently');
    await t.breaker.pass();

    const b = await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id);
    expect(b).toMatchObject({
      state: 'OPEN',
      consecutiveFailures: POLICY.threshold + 1,
      openedAt: new Date(t.clock.now()),
    });
    const warnings = t.logger.lines.filter((l) => l.level === 'WARNING');
    expect(warnings.map((l) => l.message)).toEqual([
      expect.stringMatching(/opened/),
      expect.stringMatching(/probe failed; re-opened/),
    ]);
    expect(await t.claim(parked)).toEqual([]);
    await t.clock.advance(POLICY.cooldownMs);
    await t.breaker.pass();
    expect(await t.claim(parked)).toHaveLength(1);
  });

  it('two claimers at once admit a single probe', async () => {
    const t = await setup(db());
    await t.open();
    const parked = await t.createArchives(t.w.archive.id, 6);
    await t.clock.advance(POLICY.cooldownMs);
    await t.breaker.pass();
    const peer = await backend.peer();
    try {
      // The first claimer writes its probe and then holds its transaction open until told to
      // commit; the second starts meanwhile and must not take a probe of its own.
      let reached!: () => void;
      let commit!: () => void;
      const atGate = new Promise<void>((r) => {
        reached = r;
      });
      const gate = new Promise<void>((r) => {
        commit = r;
      });
      const held: Database = {
        ...peer,
        transaction: (fn) =>
          peer.transaction(async (tx) => {
            const result = await fn(tx);
            reached();
            await gate;
            return result;
          }),
      };
      const first = new OperationStore(held, { clock: t.clock }).claimDue(1);
      await atGate;
      const second = t.store.claimDue(1);
      await backend.waitUntilBlocked();
      commit();
      const probes = [...(await first).claimed, ...(await second).claimed]
        .map((c) => c.id)
        .filter((id) => parked.includes(id));
      expect(probes).toHaveLength(1);
    } finally {
      if (peer !== db()) await peer.close();
    }
  });

  it('opstate status shows breakers that are not closed; opstate breaker reset closes one', async () => {
    const t = await setup(db());
    const failing = await t.open();
    const parked = await t.createArchives(t.w.archive.id, 1);

    const json = await captureRun(createStatusCommand(shared), ['--json']);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.out.join('\n')) as {
      operations: Record<string, Record<string, number>>;
      circuitBreakers: CircuitBreakerStatus[];
    };
    expect(Object.keys(parsed)).toEqual([
      'leaders',
      'operations',
      'packages',
      'waiting',
      'countsDrift',
      'circuitBreakers',
      'flowLimits',
      'copies',
      'deletions',
      'queues',
      'queueReadersUnknown',
      'attention',
    ]);
    expect(parsed.operations[OperationKind.LONG_TERM_ARCHIVE]?.PENDING).toBeGreaterThanOrEqual(1);
    const mine = parsed.circuitBreakers.filter((b) => b.locationId === t.w.archive.id);
    expect(mine).toEqual([
      {
        kind: OperationKind.LONG_TERM_ARCHIVE,
        locationId: t.w.archive.id,
        location: `${t.w.archive.site}/lta`,
        state: 'OPEN',
        consecutiveFailures: POLICY.threshold,
        openedAt: new Date(t.clock.now()).toISOString(),
        lastError: {
          message: `archive unreachable (${failing.at(-1)})`,
          retryable: true,
          operationId: failing.at(-1),
          attempt: 1,
          at: expect.any(String),
        },
      },
    ]);

    const human = await captureRun(createStatusCommand(shared), []);
    const line = human.out.find((l) => l.includes(t.w.archive.id));
    expect(line).toMatch(
      /^long_term_archive\s+site-\S+\/lta \(\S+\)\s+OPEN\s+3\s+\S+\s+archive unreachable/,
    );

    const reset = await captureRun(createBreakerCommand(shared), [
      'reset',
      OperationKind.LONG_TERM_ARCHIVE,
      t.w.archive.id,
    ]);
    expect(reset).toEqual({
      code: 0,
      out: [
        `long_term_archive at ${t.w.archive.site}/lta: OPEN → CLOSED (3 consecutive failures cleared)`,
      ],
    });
    expect(await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id)).toBeUndefined();
    expect(await t.claim(parked)).toEqual(parked);
    // A pass after the reset does not undo it.
    await t.breaker.pass();
    expect(await t.breakerOf(OperationKind.LONG_TERM_ARCHIVE, t.w.archive.id)).toBeUndefined();
    const again = await captureRun(createBreakerCommand(shared), [
      'reset',
      OperationKind.LONG_TERM_ARCHIVE,
      t.archive2.id,
    ]);
    expect(again.out).toEqual([
      `no circuit breaker for long_term_archive at ${t.archive2.id}: nothing to reset`,
    ]);
  });
}
