import { type SQL, sql } from 'drizzle-orm';

/**
 * The retention claims on a copy, as a subquery of group ids (one row per link, so a group may
 * repeat): the active groups with an operation that consumes or produced the copy `copyId` names.
 * Each link's operation, then its group, is looked up by key (`offset 0` keeps them lookups): left
 * free, Postgres with young statistics hash-joined a sequential scan of every operation into the
 * check, which then grew with the history.
 *
 * @example
 * ```ts
 * sql`select exists (${activeClaimsOn(sql`${copyId}::uuid`)}) as held`;
 * ```
 */
export function activeClaimsOn(copyId: SQL): SQL {
  return sql`select g.id from (
      select operation_id from operation_input where physical_copy_id = ${copyId}
      union select operation_id from operation_output where physical_copy_id = ${copyId}
    ) l
    cross join lateral (
      select o.group_id from operation o where o.id = l.operation_id offset 0
    ) o
    cross join lateral (
      select g.id from operation_group g where g.id = o.group_id and g.active offset 0
    ) g`;
}
