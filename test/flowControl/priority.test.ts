import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSubmitCommand } from '../../cli/commands/submit.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { FlowLimitRepository } from '../../persistence/FlowLimitRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { inputFor, makeWorld, tableCounts } from '../persistence/fixtures.ts';

const MINUTE = 60_000;

describe('priorities in the claim, on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDb = await createTestDatabase('opstate_priority', { migrated: true });
    database = await openDatabase({ databaseUrl: testDb.url });
    await migrate(database);
  });

  afterAll(async () => {
    await database?.close();
    await dropTestDatabase(testDb);
  });

  /** A store on its own clock, with the backlog of earlier tests claimed out of the way. */
  async function fresh(start: string) {
    const clock = new SimulatedClock(Date.parse(start));
    const store = new OperationStore(database, { clock });
    for (;;) {
      const { claimed } = await store.claimDue(10_000);
      if (claimed.length === 0) break;
      for (const c of claimed) await store.apply(c.id, { type: 'CANCEL', reason: 'test over' });
    }
    return { clock, store, w: await makeWorld(database) };
  }

  it('claims higher priorities first and FIFO within one, a batch at a time', async () => {
    const { clock, store, w } = await fresh('2032-01-01T00:00:00Z');
    const input = inputFor(OperationKind.TRANSFER, w);
    const made: { id: string; priority: number }[] = [];
    for (const priority of [0, -5, 10, 0, 100, 10, -100, 0]) {
      await clock.advance(1000);
      made.push({ id: await store.create({ ...input, priority }), priority });
    }
    const batches: string[][] = [];
    for (;;) {
      const { claimed } = await store.claimDue(3);
      if (claimed.length === 0) break;
      batches.push(claimed.map((c) => c.id));
    }
    const expected = [...made]
      .map((m, n) => ({ ...m, n }))
      .sort((a, b) => b.priority - a.priority || a.n - b.n)
      .map((m) => m.id);
    // Each batch is the next three in claim order (a batch comes back as a set).
    expect(batches.map((b) => [...b].sort())).toEqual([
      expected.slice(0, 3).sort(),
      expected.slice(3, 6).sort(),
      expected.slice(6).sort(),
    ]);
  });

  it('an operation due past the starvation age goes before any priority', async () => {
    const { clock, store, w } = await fresh('2032-02-01T00:00:00Z');
    const input = inputFor(OperationKind.TRANSFER, w);
    const low = await store.create({ ...input, priority: -100 });
    await clock.advance(10 * MINUTE);
    const high = await store.create({ ...input, priority: 100 });
    const mid = await store.create({ ...input, priority: 50 });
    const claimOne = async (starvationAgeMs: number) =>
      (await store.claimDue(1, undefined, { starvationAgeMs })).claimed.map((c) => c.id);
    // Ten minutes is within an age of fifteen: priority decides.
    expect(await claimOne(15 * MINUTE)).toEqual([high]);
    // With an age of five, the low one has starved: it goes first, then priority again.
    expect(await claimOne(5 * MINUTE)).toEqual([low]);
    expect(await claimOne(5 * MINUTE)).toEqual([mid]);
  });

  it('under a flow limit with less room than the batch: the starved first, then by priority, FIFO within one', async () => {
    const { clock, store, w } = await fresh('2032-03-01T00:00:00Z');
    const limits = new FlowLimitRepository(database);
    await limits.set({ location: w.buffer.id, kind: OperationKind.TRANSFER, max: 2 });
    try {
      const input = inputFor(OperationKind.TRANSFER, w);
      const low = await store.create({ ...input, priority: -100 });
      await clock.advance(10 * MINUTE);
      const made: string[] = [];
      for (const priority of [0, 10, 0, 100, 10, 0]) {
        await clock.advance(1000);
        made.push(await store.create({ ...input, priority }));
      }
      const [p0, p10, q0, p100, q10, r0] = made;
      /** Claims what the limit lets start, then lets all of it finish. */
      const pass = async () => {
        const { claimed } = await store.claimDue(100, undefined, { starvationAgeMs: 5 * MINUTE });
        for (const c of claimed) await store.apply(c.id, { type: 'CANCEL', reason: 'ran' });
        return claimed.map((c) => c.id).sort();
      };
      // The low one has waited past the starvation age: it goes first, with the highest priority.
      expect(await pass()).toEqual([low, p100].sort());
      expect(await pass()).toEqual([p10, q10].sort());
      // Of three at priority 0, the two created first.
      expect(await pass()).toEqual([p0, q0].sort());
      expect(await pass()).toEqual([r0]);
      expect(await pass()).toEqual([]);
    } finally {
      await limits.clear({ location: w.buffer.id, kind: OperationKind.TRANSFER });
    }
  });

  it('refuses a priority out of range or not whole, and writes nothing; --priority too', async () => {
    const store = new OperationStore(database);
    const w = await makeWorld(database);
    const input = inputFor(OperationKind.TRANSFER, w);
    const before = await tableCounts(database);
    for (const priority of [101, -101, 1.5, '5', Number.NaN, null]) {
      const err = await store.create({ ...input, priority } as never).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, String(priority)).toBeInstanceOf(OpstateError);
      expect((err as OpstateError).code).toBe('BAD_INPUT');
      expect((err as OpstateError).message).toMatch(
        /priority must be a whole number from -100 to 100 \(higher first; default 0\); got /,
      );
    }
    const submit = createSubmitCommand(() => openDatabase({ databaseUrl: testDb.url, max: 1 }));
    const run = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await submit.run(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
      return { code, out, err };
    };
    const fields = JSON.stringify(input.fields);
    for (const value of ['101', 'high', '2.5']) {
      const r = await run('transfer', '--fields', fields, '--priority', value);
      expect(r.code, value).toBe(2);
      expect(r.err.join('\n')).toMatch(/priority/);
    }
    expect(await tableCounts(database)).toEqual(before);
    const ok = await run('transfer', '--fields', fields, '--priority', '-7');
    expect(ok.code).toBe(0);
    expect((await store.load(ok.out[0] as string)).priority).toBe(-7);
  });
});
