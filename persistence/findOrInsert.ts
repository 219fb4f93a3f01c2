import { type SQL, sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { SqlState, sqlStateOf } from './databaseError.ts';
import type { Database, Executor, Row } from './openDatabase.ts';

/** One attribute of a registration beside its natural key. */
export interface RegisteredAttribute {
  readonly column: string;
  /** The caller's name for it (`storageRoot`), as messages say it. */
  readonly name: string;
  /** `undefined`: not given (inserted as null, never compared). */
  readonly value: string | number | null | undefined;
  /** The Postgres type a parameter is cast to (`uuid`, `bigint`); default text. */
  readonly cast?: 'uuid' | 'bigint';
}

/**
 * A row that setup code registers — a location, a package, a file — described so that one insert
 * can be found again by its natural key. Tables and columns are constants of the repository,
 * never caller input.
 */
export interface Registration {
  /** What the row is, for messages (`location`, `raw data package`). */
  readonly what: string;
  /** How messages name the row (`cologne/lta`, `obs-1`). */
  readonly named: string;
  readonly table: string;
  /** The natural key, column by column. */
  readonly key: readonly RegisteredAttribute[];
  readonly attributes: readonly RegisteredAttribute[];
  /**
   * True when a unique constraint covers the key (an insert then says `on conflict do nothing`);
   * false when none does, and a transaction-scoped advisory lock on the key serialises the
   * registrations of one key instead.
   */
  readonly unique: boolean;
  /** The repository method that returns the existing row, named in messages. */
  readonly findOrAdd: string;
}

const param = (a: RegisteredAttribute): SQL =>
  a.cast === undefined ? sql`${a.value ?? null}` : sql`${a.value ?? null}::${sql.raw(a.cast)}`;

function columnsOf(r: Registration): SQL {
  return sql.raw(['id', ...[...r.key, ...r.attributes].map((a) => a.column)].join(', '));
}

function insertOf(r: Registration): SQL {
  const given = [...r.key, ...r.attributes];
  return sql`insert into ${sql.raw(r.table)} (${sql.raw(given.map((a) => a.column).join(', '))})
    values (${sql.join(given.map(param), sql`, `)})`;
}

function whereKey(r: Registration): SQL {
  return sql.join(
    r.key.map((a) => sql`${sql.raw(a.column)} = ${param(a)}`),
    sql` and `,
  );
}

/**
 * The rows with a registration's key (at most two: two say the key was registered twice by a
 * plain insert where no constraint guards it).
 *
 * @example
 * ```ts
 * const [existing] = await selectByKey(database, registration);
 * ```
 */
export function selectByKey(exec: Executor, r: Registration): Promise<Row[]> {
  return exec.execute(
    sql`select ${columnsOf(r)} from ${sql.raw(r.table)} where ${whereKey(r)} order by id limit 2`,
  );
}

/**
 * Inserts a registration, returning its row. A duplicate key is a `CONFLICT` in one sentence
 * naming the row that is there (the driver's error kept as `cause`); nothing is written then.
 *
 * @example
 * ```ts
 * const row = await insertRegistration(database, location);
 * ```
 */
export async function insertRegistration(database: Database, r: Registration): Promise<Row> {
  try {
    const [row] = await database.execute(sql`${insertOf(r)} returning ${columnsOf(r)}`);
    return row as Row;
  } catch (err) {
    if (!(err instanceof OpstateError) || sqlStateOf(err.cause) !== SqlState.UNIQUE_VIOLATION) {
      throw err;
    }
    const [existing] = await selectByKey(database, r);
    if (existing === undefined) throw err;
    throw new OpstateError(
      OpstateErrorCode.CONFLICT,
      `${r.what} ${r.named} already exists (${describeRow(r, existing)}); reuse that id (${r.findOrAdd} returns it) or choose another name`,
      { details: { id: String(existing.id), existing }, cause: err.cause },
    );
  }
}

/**
 * Finds the row with a registration's key, or inserts it: the existing row comes back when every
 * attribute the caller gave matches it, and a `CONFLICT` names each one that differs. Safe
 * against concurrent callers: with a unique constraint, `insert … on conflict do nothing` then a
 * select; without one, both inside a transaction holding an advisory lock on the key.
 *
 * @example
 * ```ts
 * const { row, created } = await findOrInsert(database, location);
 * ```
 */
export async function findOrInsert(
  database: Database,
  r: Registration,
): Promise<{ row: Row; created: boolean }> {
  const found = r.unique
    ? await insertOrSelect(database, r)
    : await lockedInsertOrSelect(database, r);
  if (!found.created) checkSame(r, found.row);
  return found;
}

async function insertOrSelect(database: Database, r: Registration) {
  const [inserted] = await database.execute(
    sql`${insertOf(r)} on conflict (${sql.raw(r.key.map((a) => a.column).join(', '))}) do nothing
        returning ${columnsOf(r)}`,
  );
  if (inserted !== undefined) return { row: inserted, created: true };
  // A new statement: it sees the row a concurrent insert committed after this one's snapshot.
  const [existing] = await selectByKey(database, r);
  if (existing === undefined) {
    throw new OpstateError(
      OpstateErrorCode.CONFLICT,
      `${r.what} ${r.named} was removed while it was registered; try again`,
      { retryable: true },
    );
  }
  return { row: existing, created: false };
}

function lockedInsertOrSelect(database: Database, r: Registration) {
  const lockKey = `opstate:${r.table}:${JSON.stringify(r.key.map((a) => a.value))}`;
  return database.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${lockKey}, 0))`);
    const rows = await selectByKey(tx, r);
    const [existing] = rows;
    if (rows.length > 1) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `${r.what} ${r.named} is registered more than once (ids ${rows.map((x) => x.id).join(', ')}); ${r.findOrAdd} cannot choose, so pass the id you mean instead`,
        { details: { ids: rows.map((x) => String(x.id)) } },
      );
    }
    if (existing !== undefined) return { row: existing, created: false };
    const [inserted] = await tx.execute(sql`${insertOf(r)} returning ${columnsOf(r)}`);
    return { row: inserted as Row, created: true };
  });
}

/** Throws `CONFLICT` naming every given attribute the existing row does not have. */
function checkSame(r: Registration, row: Row): void {
  const differing = r.attributes.filter(
    (a) => a.value !== undefined && normal(a, row[a.column]) !== normal(a, a.value),
  );
  if (differing.length === 0) return;
  const what = differing
    .map((a) => `its ${a.name} is ${shown(a, row[a.column])}, not ${shown(a, a.value)}`)
    .join('; ');
  throw new OpstateError(
    OpstateErrorCode.CONFLICT,
    `${r.what} ${r.named} already exists (id ${String(row.id)}) with other attributes: ${what}; give the attributes it has to reuse it, or choose another name`,
    {
      details: {
        id: String(row.id),
        differing: differing.map((a) => a.name),
        existing: row,
      },
    },
  );
}

function normal(a: RegisteredAttribute, value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return a.cast === 'bigint' ? String(Number(value)) : String(value);
}

function shown(a: RegisteredAttribute, value: unknown): string {
  const v = normal(a, value);
  return v === null ? 'unset' : a.cast === 'bigint' ? v : `'${v}'`;
}

/** The existing row for a message: its id, then each attribute it has. */
function describeRow(r: Registration, row: Row): string {
  return [
    `id ${String(row.id)}`,
    ...r.attributes
      .filter((a) => row[a.column] !== null && row[a.column] !== undefined)
      .map((a) => `${a.name} ${String(row[a.column])}`),
  ].join(', ');
}
