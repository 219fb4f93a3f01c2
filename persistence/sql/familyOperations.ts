import { type SQL, sql } from 'drizzle-orm';

/** A uuid[] parameter from ids already checked to be uuids. */
export const uuidArray = (ids: readonly string[]): SQL => sql`${`{${ids.join(',')}}`}::uuid[]`;

/**
 * The operations on a family of packages as `(operation_id, subject)` rows: the packaging,
 * long-term archive (and, with `staging`, staging) of the raw data packages `packages`, and the
 * bundling, transfer and unpack of the data transfer packages `bundles`. Each branch is one range
 * of its subtype's artifact index.
 */
export function familyOperations(
  packages: readonly string[],
  bundles: readonly string[],
  options: { staging: boolean },
): SQL {
  const p = uuidArray(packages);
  const b = uuidArray(bundles);
  const staging = options.staging
    ? sql`union all select operation_id, raw_data_package_id from staging_operation
        where raw_data_package_id = any(${p})`
    : sql``;
  return sql`(
    select operation_id, raw_data_package_id as subject from packaging_operation
      where raw_data_package_id = any(${p})
    union all select operation_id, raw_data_package_id from long_term_archive_operation
      where raw_data_package_id = any(${p})
    ${staging}
    union all select operation_id, data_transfer_package_id from bundling_operation
      where data_transfer_package_id = any(${b})
    union all select operation_id, data_transfer_package_id from transfer_operation
      where data_transfer_package_id = any(${b})
    union all select operation_id, data_transfer_package_id from unpack_operation
      where data_transfer_package_id = any(${b})
  )`;
}
