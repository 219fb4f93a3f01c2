import { sql } from 'drizzle-orm';
import type { Executor } from '../openDatabase.ts';

/** A verified archive copy of a package, where it is, and what it holds. */
export interface StagingSource {
  readonly copyId: string;
  readonly locationId: string;
  readonly site: string;
  readonly name: string;
}

/**
 * The package's archive copy a staging reads: a PRESENT copy of the raw data package at a
 * long-term-archive location, produced by a COMPLETED archive operation that no rollback
 * superseded, whose last verification is VERIFIED and whose content digest is the copy's checksum
 * (the same test the deletion path applies to an archive it relies on), the oldest first. An
 * archive a rollback redoes vouches for nothing until its re-run verifies again. Locked `FOR SHARE` in the caller's transaction, so
 * the copy cannot change between this read and the claim taken on it.
 *
 * @example
 * ```ts
 * const source = await selectStagingSource(tx, packageId);
 * ```
 */
export async function selectStagingSource(
  exec: Executor,
  packageId: string,
): Promise<StagingSource | undefined> {
  const [r] = await exec.execute(sql`
    select a.id, a.location_id, l.site, l.name
    from physical_copy a
    join data_location l on l.id = a.location_id and l.location_type = 'long_term_archive'
    join operation_output x on x.physical_copy_id = a.id
    join operation o on o.id = x.operation_id
      and o.kind = 'long_term_archive' and o.status = 'COMPLETED' and o.superseded_by is null
    join lateral (
      select r.state, r.content_sha256 from archive_record r
      where r.operation_id = o.id and r.state in ('VERIFIED', 'VERIFY_FAILED')
      order by r.id desc limit 1
    ) v on true
    where a.artifact_type = 'raw_data_package' and a.artifact_id = ${packageId}::uuid
      and a.status = 'PRESENT' and v.state = 'VERIFIED'
      and a.checksum = 'sha256:' || v.content_sha256
    order by a.created_at, a.id
    limit 1
    for share of a`);
  return r === undefined
    ? undefined
    : {
        copyId: String(r.id),
        locationId: String(r.location_id),
        site: String(r.site),
        name: String(r.name),
      };
}
