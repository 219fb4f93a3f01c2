import { type SQL, sql } from 'drizzle-orm';

/**
 * A lateral lookup of one row by its primary key `id`, for a `join … on true`: `lateral (select
 * <columns> from <table> <alias> where <alias>.id = <key> [and <where>] offset 0) <alias>`.
 *
 * Written as a join, such a lookup is the planner's to turn around, and with statistics taken
 * before a table grew Postgres did: it hash-joined a sequential scan of every operation into the
 * circuit breakers' read, scanned every operation per copy in the retention-claim check, and read
 * every COMPLETED archive (by the `(kind, status)` index) for each deletion candidate and each copy
 * decision. `offset 0` keeps the subquery from being pulled up, so it stays one index probe per
 * outer row, whatever the statistics say. `table`, `alias`, `key` and `columns` are SQL text from
 * the caller's own code, never input.
 *
 * @example
 * ```ts
 * sql`select t.id, o.kind from t join ${byKey('operation', 'o', 't.operation_id', 'o.kind')} on true`;
 * ```
 */
export function byKey(
  table: string,
  alias: string,
  key: string,
  columns: string,
  where?: SQL,
): SQL {
  const also = where === undefined ? sql`` : sql` and ${where}`;
  return sql`lateral (select ${sql.raw(columns)} from ${sql.raw(`${table} ${alias}`)}
    where ${sql.raw(`${alias}.id = ${key}`)}${also} offset 0) ${sql.raw(alias)}`;
}
