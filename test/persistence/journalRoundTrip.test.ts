import { deepStrictEqual } from 'node:assert/strict';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { JournalRepository } from '../../persistence/JournalRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { JSON_LOOKING, propertySeed, randomJson, seededRandom } from '../helpers/randomJson.ts';
import { inputFor, makeWorld } from './fixtures.ts';
import { verifiedArchiveOutput } from './verifiedArchive.ts';

const SEED = propertySeed(0x32);
const VALUES = 200;

/** The jsonb type a value must be stored as (a string stored once is a jsonb string). */
function jsonbType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value === 'object' ? 'object' : typeof value;
}

/** An operation IN_PROGRESS at attempt 1, for steps to be recorded on. */
async function inProgress(database: Database): Promise<string> {
  const store = new OperationStore(database);
  const id = await store.create(
    inputFor(OperationKind.LONG_TERM_ARCHIVE, await makeWorld(database)),
  );
  await store.apply(id, { type: 'SCHEDULE' });
  await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-journal' });
  return id;
}

const backends: [string, () => Promise<{ database: Database; close(): Promise<void> }>][] = [
  [
    'Postgres',
    async () => {
      const testDb: TestDatabase = await createTestDatabase('opstate_journal', { migrated: true });
      const database = await openDatabase({ databaseUrl: testDb.url });
      return {
        database,
        close: async () => {
          await database.close();
          await dropTestDatabase(testDb);
        },
      };
    },
  ],
  [
    'PGlite',
    async () => {
      const database = await openDatabase({ dataDir: 'memory://', engine: 'pglite' });
      return { database, close: () => database.close() };
    },
  ],
];

describe.each(backends)('the journal on %s', (_name, open) => {
  let backend: Awaited<ReturnType<typeof open>>;
  let database: Database;
  let journal: JournalRepository;

  beforeAll(async () => {
    backend = await open();
    database = backend.database;
    await migrate(database);
    journal = new JournalRepository(database);
  });
  afterAll(async () => {
    await backend?.close();
  });

  it(`gives back every recorded JSON value deep-equal (seed ${SEED}, ${VALUES} random values)`, async () => {
    const random = seededRandom(SEED);
    const values: unknown[] = [
      ...JSON_LOOKING,
      null,
      [],
      {},
      [JSON_LOOKING],
      { etag: '"abc"', nested: { deeper: ['123', 123, '{"a":1}', { a: 1 }] } },
      ...Array.from({ length: VALUES }, () => randomJson(random)),
    ];
    const id = await inProgress(database);
    for (const [n, value] of values.entries()) {
      const { step, recorded } = await journal.recordStep({
        operationId: id,
        attempt: 1,
        name: `v${n}`,
        state: 'done',
        result: value,
      });
      expect(recorded).toBe(true);
      // node's deep equality: vitest's strict one also compares `a.constructor`, which a
      // generated object may hold as a key of its own.
      deepStrictEqual(step.result, value, `value ${n} as written (seed ${SEED})`);
    }
    // The plain select, the re-record path (the row recorded first) and one step by name.
    const listed = await journal.listSteps(id);
    expect(listed.map((s) => s.name)).toEqual(values.map((_, n) => `v${n}`));
    for (const [n, value] of values.entries()) {
      deepStrictEqual(listed[n]?.result, value, `value ${n} listed (seed ${SEED})`);
    }
    for (const n of [0, 1, 2, values.length - 1]) {
      const again = await journal.recordStep({
        operationId: id,
        attempt: 1,
        name: `v${n}`,
        state: 'done',
        result: 'something else',
      });
      expect(again.recorded).toBe(false);
      deepStrictEqual(again.step.result, values[n], `value ${n} recorded before`);
      deepStrictEqual(
        (await journal.getStep(id, `v${n}`))?.result,
        values[n],
        `value ${n} by name`,
      );
    }
    // Stored once: a string is a jsonb string, an object a jsonb object.
    const types = await database.execute<{ name: string; type: string }>(sql`
      select name, jsonb_typeof(result) as type from operation_step
      where operation_id = ${id}::uuid order by id`);
    expect(types.map((t) => t.type)).toEqual(values.map(jsonbType));
  });

  it('records undefined as no result and null as null, each read back as given', async () => {
    const id = await inProgress(database);
    const none = await journal.recordStep({
      operationId: id,
      attempt: 1,
      name: 'none',
      state: 'done',
    });
    expect(none.step.result).toBeUndefined();
    await journal.recordStep({
      operationId: id,
      attempt: 1,
      name: 'null',
      state: 'done',
      result: null,
    });
    expect((await journal.getStep(id, 'none'))?.result).toBeUndefined();
    expect((await journal.getStep(id, 'null'))?.result).toBeNull();
    const again = await journal.recordStep({
      operationId: id,
      attempt: 1,
      name: 'none',
      state: 'done',
      result: 1,
    });
    expect(again).toMatchObject({ recorded: false });
    expect(again.step.result).toBeUndefined();
    const rows = await database.execute<{ name: string; missing: boolean }>(sql`
      select name, result is null as missing from operation_step
      where operation_id = ${id}::uuid order by id`);
    expect(rows).toEqual([
      { name: 'none', missing: true },
      { name: 'null', missing: false },
    ]);
  });

  it('refuses a result JSON cannot keep, naming where it is and what to record, and writes nothing', async () => {
    const id = await inProgress(database);
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = cycle;
    const refused: [unknown, RegExp][] = [
      [10n, /^step 'bad' result is a bigint, .*String\(n\)/],
      [new Date(0), /^step 'bad' result is a Date, .*toISOString\(\)/],
      [{ nested: { when: new Date(0) } }, /^step 'bad' result\.nested\.when is a Date/],
      [() => 1, /^step 'bad' result is a function, which is not data/],
      [new Map([['a', 1]]), /^step 'bad' result is a Map, .*Object\.fromEntries/],
      [[1, Number.NaN], /^step 'bad' result\[1\] is NaN, .*use null or a string/],
      [{ size: Number.POSITIVE_INFINITY }, /^step 'bad' result\.size is Infinity/],
      [[1, undefined], /^step 'bad' result\[1\] is undefined, .*come back null/],
      [new Array(3).fill(1, 0, 1), /^step 'bad' result\[1\] is a hole/],
      [cycle, /^step 'bad' result\.self is a reference to an enclosing value \(a cycle\)/],
      [
        { 'odd key': 'a\u0000b' },
        /^step 'bad' result\["odd key"\] is a string holding U\+0000, .*base64/,
      ],
      ['\ud800 alone', /^step 'bad' result is a string with an unpaired UTF-16 surrogate/],
    ];
    for (const [value, message] of refused) {
      const err = await journal
        .recordStep({ operationId: id, attempt: 1, name: 'bad', state: 'done', result: value })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err, String(message)).toBeInstanceOf(OpstateError);
      expect((err as OpstateError).code).toBe(OpstateErrorCode.BAD_INPUT);
      expect((err as OpstateError).message).toMatch(message);
    }
    expect(await journal.getStep(id, 'bad')).toBeUndefined();
    // An undefined property is left out, as JSON.stringify does; the key reads undefined.
    const { step } = await journal.recordStep({
      operationId: id,
      attempt: 1,
      name: 'optional',
      state: 'done',
      result: { etag: 'x', versionId: undefined },
    });
    expect(step.result).toStrictEqual({ etag: 'x' });
  });

  it('clears lastError on COMPLETE and keeps the failure in the breadcrumbs and transitions', async () => {
    const store = new OperationStore(database);
    const w = await makeWorld(database);
    const id = await store.create(inputFor(OperationKind.LONG_TERM_ARCHIVE, w));
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-1' });
    const error = { message: 'no such bucket', retryable: true };
    await store.apply(id, { type: 'FAIL', attempt: 1, error });
    expect((await store.load(id)).lastError).toEqual(error);
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 2, workerId: 'w-2' });
    // The batched completion statement (what a worker's completion goes through).
    await store.complete(id, 2, [await verifiedArchiveOutput(database, id, 2)]);
    const done = await store.load(id);
    expect(done).toMatchObject({ status: 'COMPLETED', attempt: 2, lastError: null });
    expect(done.snapshot.context.lastError).toBeNull();
    const [column] = await database.execute<{ cleared: boolean }>(
      sql`select last_error is null as cleared from operation where id = ${id}::uuid`,
    );
    expect(column?.cleared).toBe(true);
    expect(await journal.listFailures(id)).toMatchObject([{ attempt: 1, error }]);
    expect((await journal.listTransitions(id)).map((t) => `${t.event}#${t.attempt}`)).toEqual([
      'CREATE#1',
      'SCHEDULE#1',
      'START#1',
      'FAIL#1',
      'SCHEDULE#2',
      'START#2',
      'COMPLETE#2',
    ]);
  });
});
