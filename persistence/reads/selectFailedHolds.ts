import { sql } from 'drizzle-orm';
import type { FailedHold } from '../../machines/attention.ts';
import type { Executor } from '../openDatabase.ts';
import { uuidArray } from '../sql/selectOperations.ts';

/**
 * What waits on each of these FAILED operations where a declared pipeline runs (its pass has
 * written a cursor): the packages whose branch it stops. A bundling, transfer or unpack holds back
 * every member of its data transfer package; a packaging every member of its package's bundle
 * (bundling waits for all of them), or only its package when it belongs to none; a long-term
 * archive its package. An operation a rollback redoes holds back nothing, and without a pipeline
 * nothing waits on anything: the map is empty.
 *
 * @example
 * ```ts
 * const holds = await selectFailedHolds(database, failedRows.map((r) => r.id));
 * holds.get(id)?.packages; // 10
 * ```
 */
export async function selectFailedHolds(
  exec: Executor,
  operationIds: readonly string[],
): Promise<Map<string, FailedHold>> {
  if (operationIds.length === 0) return new Map();
  const rows = await exec.execute(sql`
    with failed as (
      select o.id,
        coalesce(p.raw_data_package_id, a.raw_data_package_id) as package_id,
        coalesce(d.data_transfer_package_id, t.data_transfer_package_id,
                 u.data_transfer_package_id, r.data_transfer_package_id) as bundle_id
      from operation o
      left join packaging_operation p on p.operation_id = o.id
      left join long_term_archive_operation a on a.operation_id = o.id
      left join bundling_operation d on d.operation_id = o.id
      left join transfer_operation t on t.operation_id = o.id
      left join unpack_operation u on u.operation_id = o.id
      left join raw_data_package r on r.id = p.raw_data_package_id
      where o.id = any(${uuidArray([...new Set(operationIds)])}::uuid[])
        and o.status = 'FAILED' and o.superseded_by is null
        and exists (select 1 from pipeline_cursor)
    )
    select f.id::text as id, f.package_id::text as package_id, f.bundle_id::text as bundle_id,
      case when f.bundle_id is null then 1
           else (select count(*) from raw_data_package m
                 where m.data_transfer_package_id = f.bundle_id) end::int as packages
    from failed f
    where f.package_id is not null or f.bundle_id is not null`);
  return new Map(
    rows.map((r) => [
      String(r.id),
      {
        packages: Number(r.packages),
        rawDataPackageId: r.package_id == null ? null : String(r.package_id),
        dataTransferPackageId: r.bundle_id == null ? null : String(r.bundle_id),
      },
    ]),
  );
}
