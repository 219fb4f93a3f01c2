import { expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import {
  HistoryRetentionRepository,
  type PruneResult,
} from '../../persistence/HistoryRetention.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { completedOperation, inputFor, makeWorld } from './fixtures.ts';
import type { SuiteBackend } from './storeSuite.ts';

const DAY = 86_400_000;
const KEEP = 400 * DAY;
const WIDTH = 1_000;
/** A time past the policy for everything written during the test. */
const LATER = () => new Date(Date.now() + KEEP + DAY);

interface Range {
  readonly name: string;
  readonly lower: number;
  readonly upper: number;
}

/**
 * The retention of the transition history, on one backend: partitions made ahead of the ids,
 * whole old partitions dropped by the policy, and never one that holds a live operation's
 * transitions, a pipeline's unread completions or the relay's unread dispatches; the lineage and
 * the operations themselves stay. Each test writes into partitions of its own: the ids are moved
 * on to the next partition boundary by the schema's owner (as a busy history would), so the suite
 * runs beside others on one database.
 */
export function retentionSuite(backend: SuiteBackend): void {
  const db = () => backend.database();
  const owner = () => backend.owner?.() ?? backend.database();
  const retention = () => new HistoryRetentionRepository(db());

  /** The partitions made so far: the highest bound. */
  async function top(): Promise<number> {
    const made = (await retention().partitions()).filter((p) => !p.isDefault);
    return Math.max(...made.map((p) => p.upperId as number));
  }

  /** The next id becomes `id` (the sequence only moves on). */
  async function idsFrom(id: number): Promise<void> {
    await owner().execute(`select setval('operation_transition_id_seq', ${id}, false)`);
  }

  /** A fresh partition the next rows go into: the ids moved to its start, partitions made ahead. */
  async function freshPartition(): Promise<Range> {
    const r = retention();
    await r.set({ keepMs: KEEP, partitionIds: WIDTH, by: 'suite' });
    const lower = await top();
    await idsFrom(lower);
    expect(await r.extend()).toBeGreaterThanOrEqual(2);
    return { name: `operation_transition_p${lower}`, lower, upper: lower + WIDTH };
  }

  /**
   * The range is whole (the ids moved past it), and the relay and any pipeline (another suite's,
   * on the same database; none runs here) have read past it.
   */
  async function close(range: Range): Promise<void> {
    await idsFrom(range.upper);
    await retention().extend();
    await owner().execute(
      `update pipeline_cursor set after_id = ${range.upper} where after_id < ${range.upper}`,
    );
    await owner().execute(
      `insert into dispatch_relay_cursor (id, after_id) values (1, ${range.upper})
       on conflict (id) do update set after_id = greatest(dispatch_relay_cursor.after_id, excluded.after_id)`,
    );
  }

  /** A transfer created and cancelled: finished, with two transitions. */
  async function cancelledTransfer(): Promise<string> {
    const store = new OperationStore(db());
    const id = await store.create(inputFor(OperationKind.TRANSFER, await makeWorld(db())));
    await store.apply(id, { type: 'CANCEL', reason: 'not needed' }, { by: 'operator' });
    return id;
  }

  const stepOf = (result: PruneResult, name: string) =>
    [...result.dropped, ...result.kept].find((s) => s.name === name);

  const historyOf = async (id: string) =>
    (
      await db().execute<{ n: number; partition: string | null }>(
        `select count(*)::int as n, min(tableoid::regclass::text) as partition
           from operation_transition where operation_id = '${id}'`,
      )
    )[0];

  it('writes each transition into the partition of its id, made ahead by extend', async () => {
    const range = await freshPartition();
    const w = await makeWorld(db());
    const store = new OperationStore(db());
    const id = await store.create(inputFor(OperationKind.TRANSFER, w));
    expect(await historyOf(id)).toEqual({ n: 1, partition: expect.stringContaining(range.name) });
    const parts = await retention().partitions();
    expect(parts.filter((p) => !p.isDefault && (p.lowerId ?? 0) >= range.lower)).toHaveLength(2);
    expect(parts.at(-1)?.isDefault).toBe(true);
    // Two whole partitions lie ahead of the next id again: nothing more to make until it moves.
    await retention().extend();
    expect(await retention().extend()).toBe(0);
  });

  it('drops a whole partition older than the policy whose operations are all finished; the operations, their lineage and the records stay', async () => {
    const range = await freshPartition();
    const w = await makeWorld(db());
    const store = new OperationStore(db());
    const done = await completedOperation(store, inputFor(OperationKind.TRANSFER, w), [
      { artifactType: 'data_transfer_package', artifactId: w.dtp, locationId: w.buffer.id },
    ]);
    const cancelled = await store.create(inputFor(OperationKind.UNPACK, w));
    await store.apply(cancelled, { type: 'CANCEL', reason: 'not needed' }, { by: 'operator' });
    expect((await historyOf(done))?.n).toBe(4);
    await close(range);

    // Young: kept. (Empty partitions, made ahead and passed by the jumps of the ids, may go.)
    const now = await retention().prune();
    expect(now.dropped.filter((d) => d.rows !== 0)).toEqual([]);
    expect(stepOf(now, range.name)).toMatchObject({
      dropped: false,
      reason: 'holds transitions of the last 400 days',
    });
    expect((await historyOf(done))?.n).toBe(4);

    const later = await retention().prune(LATER());
    expect(stepOf(later, range.name), JSON.stringify(later.kept)).toMatchObject({
      dropped: true,
      rows: 6,
      lowerId: range.lower,
      upperId: range.upper,
    });
    expect((await retention().partitions()).map((p) => p.name)).not.toContain(range.name);
    expect((await historyOf(done))?.n).toBe(0);
    expect((await store.load(done)).status).toBe('COMPLETED');
    expect((await store.load(cancelled)).status).toBe('FAILED');
    const [lineage] = await db().execute<{ n: number }>(
      `select count(*)::int as n from operation_output where operation_id = '${done}'`,
    );
    expect(lineage?.n).toBe(1);
    expect(
      await w.artifacts.findLiveCopy('data_transfer_package', w.dtp, w.buffer.id),
    ).toBeDefined();
  });

  it("keeps a partition holding a live operation's transitions, and drops it once that operation has finished", async () => {
    const range = await freshPartition();
    const w = await makeWorld(db());
    const store = new OperationStore(db());
    const live = await store.create(inputFor(OperationKind.TRANSFER, w));
    const other = await store.create(inputFor(OperationKind.UNPACK, w));
    await store.apply(other, { type: 'CANCEL', reason: 'not needed' }, { by: 'operator' });
    await close(range);

    const kept = await retention().prune(LATER());
    expect(stepOf(kept, range.name), JSON.stringify(kept.kept)).toMatchObject({
      dropped: false,
      reason: 'holds the history of 1 live operation(s)',
    });
    expect((await historyOf(live))?.n).toBe(1);

    await store.apply(live, { type: 'CANCEL', reason: 'done with it' }, { by: 'operator' });
    const dropped = await retention().prune(LATER());
    expect(stepOf(dropped, range.name)?.dropped).toBe(true);
    // The CANCEL went into a later partition, which is not whole yet: it stays.
    expect(await historyOf(live)).toMatchObject({ n: 1 });
    expect((await store.load(live)).status).toBe('FAILED');
  });

  it("keeps a partition a pipeline's cursor or the dispatch relay has not yet passed", async () => {
    const range = await freshPartition();
    await cancelledTransfer();
    await close(range);
    // The relay has read up to the range's first row only.
    await owner().execute(`update dispatch_relay_cursor set after_id = ${range.lower}`);
    const held = await retention().prune(LATER());
    expect(stepOf(held, range.name), JSON.stringify(held.kept)).toMatchObject({
      dropped: false,
      reason: 'the dispatch relay has not yet passed it',
    });
    await close(range);
    const pipeline = `retention-${range.lower}`;
    await owner().execute(
      `insert into pipeline_cursor (name, after_id) values ('${pipeline}', ${range.lower})`,
    );
    try {
      const behind = await retention().prune(LATER());
      expect(stepOf(behind, range.name)).toMatchObject({ dropped: false });
      expect(stepOf(behind, range.name)?.reason).toContain(pipeline);
    } finally {
      await owner().execute(`delete from pipeline_cursor where name = '${pipeline}'`);
    }
    expect(stepOf(await retention().prune(LATER()), range.name)?.dropped).toBe(true);
  });

  it('prunes nothing while the policy keeps everything (the default)', async () => {
    const range = await freshPartition();
    const id = await cancelledTransfer();
    await close(range);
    await retention().set({ keepMs: null, by: 'suite' });
    expect(await retention().prune(new Date(Date.now() + 100 * 365 * DAY))).toEqual({
      dropped: [],
      kept: [],
    });
    expect((await historyOf(id))?.n).toBe(2);
    expect((await retention().policy()).keepMs).toBeNull();
  });

  it('refuses a keep under a day or a partition under 1,000 ids, changing nothing', async () => {
    const r = retention();
    const before = await r.set({ keepMs: KEEP, partitionIds: WIDTH, by: 'suite' });
    expect(before.keepMs).toBe(KEEP);
    for (const input of [
      { keepMs: 3_600_000 },
      { keepMs: 1.5 },
      { keepMs: KEEP, partitionIds: 999 },
      { keepMs: KEEP, partitionIds: 1_000.5 },
    ]) {
      const refused = await r.set(input).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(OpstateError);
      expect((refused as OpstateError).code).toBe(OpstateErrorCode.BAD_INPUT);
    }
    expect(await r.policy()).toEqual(before);
  });

  it('rows past every partition land in the default one; the next partition is made above them', async () => {
    const r = retention();
    await r.set({ keepMs: KEEP, partitionIds: WIDTH, by: 'suite' });
    const beyond = (await top()) + 10 * WIDTH;
    await idsFrom(beyond);
    const w = await makeWorld(db());
    const store = new OperationStore(db());
    const spilt = await store.create(inputFor(OperationKind.TRANSFER, w));
    expect((await historyOf(spilt))?.partition).toContain('operation_transition_default');
    expect(await r.spilled()).toBeGreaterThanOrEqual(1);
    expect(await r.extend()).toBeGreaterThanOrEqual(2);
    const made = (await r.partitions()).filter((p) => !p.isDefault);
    expect(
      Math.min(
        ...made.filter((p) => (p.lowerId ?? 0) > beyond - WIDTH).map((p) => p.lowerId as number),
      ),
    ).toBe(beyond + 1);
    const next = await store.create(inputFor(OperationKind.TRANSFER, w));
    expect((await historyOf(next))?.partition).toContain(`operation_transition_p${beyond + 1}`);
  });
}
