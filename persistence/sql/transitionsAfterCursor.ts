import { type SQL, sql } from 'drizzle-orm';

/**
 * The rows of `operation_transition` a cursor reads next, as a row source for a `with` clause:
 * those with an id above `after` (at most `limit`, in id order) and those whose ids are in `gaps`
 * (at or below `after`: stepped over because not yet committed when read). Straight off the
 * primary key — a range scan that stops at `limit`, the gaps by point lookups in a second branch
 * (one OR of the two would scan) — and never ids joined back to the table: Postgres, with
 * statistics older than the history's growth, planned that join as a sequential scan of every
 * transition (844,000 rows, 0.47 s per read).
 *
 * @example
 * ```ts
 * sql`with t as materialized (${transitionsAfterCursor(cursor.after, cursor.gaps(now), 1024, sql`id, event`)}) select … from t`;
 * ```
 */
export function transitionsAfterCursor(
  after: number,
  gaps: readonly number[],
  limit: number,
  columns: SQL,
): SQL {
  const gapIds = gaps.filter((g) => Number.isSafeInteger(g) && g > 0 && g <= after);
  const range = sql`(select ${columns} from operation_transition where id > ${after} order by id limit ${limit})`;
  if (gapIds.length === 0) return range;
  return sql`${range}
    union all
    (select ${columns} from operation_transition where id in (${sql.raw(gapIds.join(', '))}))`;
}
