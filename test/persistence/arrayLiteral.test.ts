import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { arrayLiteral } from '../../persistence/sql/arrayLiteral.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';

let db: TestDatabase;
let database: Database;
beforeAll(async () => {
  db = await createTestDatabase('opstate_array');
  database = await openDatabase({ databaseUrl: db.url, max: 1 });
});
afterAll(async () => {
  await database?.close();
  await dropTestDatabase(db);
});

/** What Postgres reads back from `unnest` of the literal, one row per element. */
async function roundTrip(values: unknown[], type: string, json = false) {
  const rows = await database.execute<{ v: unknown; isnull: boolean }>(sql`
    select v::text as v, v is null as isnull
    from unnest(${arrayLiteral(values, { json })}::text::${sql.raw(type)}[]) with ordinality as u(v, n)
    order by n`);
  return rows.map((r) => (r.isnull ? null : r.v));
}

describe('arrayLiteral, read back by Postgres through unnest', () => {
  it('keeps text exactly: quotes, backslashes, commas, braces, the word NULL, unicode, empty', async () => {
    const values = ['a"b', 'c\\d', 'e,f', '{g}', 'NULL', 'ünï 🦆', '', ' spaced ', null];
    expect(await roundTrip(values, 'text')).toEqual(values);
  });

  it('writes JSON values whole for jsonb[], null as SQL NULL', async () => {
    const values = [{ a: 'say "hi"\\', b: [1, null, { c: '}' }] }, 'a string', 3, null];
    const back = await roundTrip(values, 'jsonb', true);
    expect(back.map((v) => (v === null ? null : JSON.parse(String(v))))).toEqual(values);
  });

  it('writes numbers, uuids and timestamps for their types, and an empty batch', async () => {
    expect(await roundTrip([1, -2, null], 'int')).toEqual(['1', '-2', null]);
    const id = '0b6c1a36-6b0e-4a3c-9a59-3f3f9a3c1d2e';
    expect(await roundTrip([id], 'uuid')).toEqual([id]);
    const at = new Date('2026-12-01T06:55:03.483Z');
    const [ts] = await roundTrip([at, at.toISOString()], 'timestamptz');
    expect(new Date(String(ts)).getTime()).toBe(at.getTime());
    expect(await roundTrip([], 'text')).toEqual([]);
  });
});
