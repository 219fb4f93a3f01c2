import { type SQL, sql } from 'drizzle-orm';
import { byKey } from './byKey.ts';

/**
 * The retention claims on a copy, as a subquery of group ids (one row per link, so a group may
 * repeat): the active groups with an operation that consumes or produced the copy `copyId` names.
 * Each link's operation, then its group, is looked up by key (`byKey`).
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
    join ${byKey('operation', 'o', 'l.operation_id', 'o.group_id')} on true
    join ${byKey('operation_group', 'g', 'o.group_id', 'g.id', sql`g.active`)} on true`;
}
