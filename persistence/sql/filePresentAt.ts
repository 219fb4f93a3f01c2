import { type SQL, sql } from 'drizzle-orm';

/**
 * Whether raw data file `f` (the alias `f` of `raw_data_file`) has a PRESENT copy at `location`
 * (a SQL expression): what a "files complete" fact claims of each of its files.
 *
 * @example
 * ```ts
 * sql`select f.id, ${filePresentAt(sql`e.location_id`)} as present from raw_data_file f`;
 * ```
 */
export const filePresentAt = (location: SQL): SQL => sql`exists (select 1 from physical_copy c
  where c.artifact_type = 'raw_data_file' and c.artifact_id = f.id
    and c.location_id = ${location} and c.status = 'PRESENT')`;
