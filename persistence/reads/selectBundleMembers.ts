import { sql } from 'drizzle-orm';
import type { BundleMembers } from '../../machines/pipelineFacts.ts';
import type { Executor } from '../openDatabase.ts';
import { uuidArray } from '../sql/selectOperations.ts';

/**
 * Per raw data package of `packageIds` that belongs to a data transfer package: that bundle and,
 * per member package (in id order), its PRESENT copy at `locationId` or null.
 *
 * @example
 * ```ts
 * const bundles = await selectBundleMembers(database, packageIds, sourceLocationId);
 * ```
 */
export async function selectBundleMembers(
  exec: Executor,
  packageIds: readonly string[],
  locationId: string,
): Promise<Map<string, BundleMembers>> {
  if (packageIds.length === 0) return new Map();
  const rows = await exec.execute(sql`
    select r.id as package_id, r.data_transfer_package_id as bundle_id, m.id as member_id,
      (select c.id from physical_copy c
        where c.artifact_type = 'raw_data_package' and c.artifact_id = m.id
          and c.location_id = ${locationId}::uuid and c.status = 'PRESENT' limit 1) as copy_id
    from raw_data_package r
    join raw_data_package m on m.data_transfer_package_id = r.data_transfer_package_id
    where r.id = any(${uuidArray([...new Set(packageIds)])}::uuid[])
    order by r.id, m.id`);
  const bundles = new Map<string, { dataTransferPackageId: string; copies: (string | null)[] }>();
  for (const r of rows) {
    const id = String(r.package_id);
    const b = bundles.get(id) ?? { dataTransferPackageId: String(r.bundle_id), copies: [] };
    b.copies.push(r.copy_id == null ? null : String(r.copy_id));
    bundles.set(id, b);
  }
  return bundles;
}
