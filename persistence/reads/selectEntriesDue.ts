import { sql } from 'drizzle-orm';
import type { Executor } from '../openDatabase.ts';
import { filePresentAt } from '../sql/filePresentAt.ts';
import { uuidArray } from '../sql/selectOperations.ts';

/** A raw data package whose files were declared complete and whose packaging is not yet made. */
export interface EntryDue {
  readonly rawDataPackageId: string;
  readonly locationId: string;
  /** Its files' PRESENT copies at the location, in file order (each file has one). */
  readonly inputs: readonly string[];
  /** A packaging of it at the location that exists already (submitted, or made before), if any. */
  readonly existingId: string | null;
}

/**
 * The oldest unconsumed "files complete" facts at `locationIds` (at most `limit`) whose files all
 * still have a PRESENT copy there, each with what its packaging reads and the packaging that
 * exists already, if one does (a rollback's superseded one does not count). A fact a file's copy
 * was lost from since it was declared is left out until the copy is there again.
 *
 * @example
 * ```ts
 * const due = await selectEntriesDue(database, [sourceId], 256);
 * ```
 */
export async function selectEntriesDue(
  exec: Executor,
  locationIds: readonly string[],
  limit: number,
): Promise<EntryDue[]> {
  if (locationIds.length === 0) return [];
  const rows = await exec.execute(sql`
    select e.raw_data_package_id::text as package_id, e.location_id::text as location_id,
      array(select c.id::text from raw_data_file f
        join physical_copy c on c.artifact_type = 'raw_data_file' and c.artifact_id = f.id
          and c.location_id = e.location_id and c.status = 'PRESENT'
        where f.raw_data_package_id = e.raw_data_package_id order by f.id) as inputs,
      (select o.id::text from packaging_operation p
        join operation o on o.id = p.operation_id and o.target_location_id = e.location_id
          and o.superseded_by is null
        where p.raw_data_package_id = e.raw_data_package_id order by o.id limit 1) as existing_id
    from package_files_complete e
    where e.packaging_operation_id is null
      and e.location_id = any(${uuidArray(locationIds)}::uuid[])
      -- A fact a file's copy was lost from since waits, and holds back none behind it.
      and not exists (select 1 from raw_data_file f
        where f.raw_data_package_id = e.raw_data_package_id
          and not ${filePresentAt(sql`e.location_id`)})
    order by e.declared_at, e.raw_data_package_id
    limit ${limit}`);
  return rows.map((r) => ({
    rawDataPackageId: String(r.package_id),
    locationId: String(r.location_id),
    inputs: r.inputs as string[],
    existingId: r.existing_id == null ? null : String(r.existing_id),
  }));
}
