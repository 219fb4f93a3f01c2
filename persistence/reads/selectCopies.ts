import { type SQL, sql } from 'drizzle-orm';
import type { PhysicalCopyStatus } from '../../machines/physicalCopyMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';
import { likeLiteral, uuidPrefixRange } from '../searchText.ts';

/** One physical copy as the copies page lists it. */
export interface CopyListRow {
  readonly id: string;
  readonly artifactType: string;
  readonly artifactId: string;
  readonly artifactName: string | null;
  /** `site/name` of its location, and the location's type. */
  readonly location: string;
  readonly locationType: string;
  readonly status: PhysicalCopyStatus;
  readonly path: string | null;
  readonly size: number | null;
  readonly deletionFailureCount: number;
  readonly lastError: string | null;
  /** When its status last changed (or a claim on it was taken). */
  readonly updatedAt: Date;
}

/** Where a page starts: after this (artifact id, copy id), newest artifact first. */
export interface CopyCursor {
  readonly artifactId: string;
  readonly id: string;
}

/**
 * One page of physical copies, grouped by artifact (newest artifact first: ids are
 * time-ordered) and within one artifact by copy, after the previous page's last row; optionally
 * only of one status, and only of artifacts whose name contains `text` (literally, any case) or
 * whose id (or the copy's) starts with it. Without text it walks the artifact index backwards.
 *
 * @example
 * ```ts
 * const copies = await selectCopies(database, { text: 'rdp-0042' }, { limit: 50 });
 * ```
 */
export async function selectCopies(
  exec: Executor,
  filter: { readonly status?: PhysicalCopyStatus | undefined; readonly text?: string | undefined },
  page: { readonly limit: number; readonly after?: CopyCursor | undefined },
): Promise<CopyListRow[]> {
  const where: SQL[] = [sql`true`];
  if (filter.status !== undefined) where.push(sql`c.status = ${filter.status}`);
  if (filter.text !== undefined) {
    const pattern = `%${likeLiteral(filter.text)}%`;
    const range = uuidPrefixRange(filter.text);
    const ids =
      range === null
        ? sql`false`
        : sql`c.artifact_id between ${range[0]}::uuid and ${range[1]}::uuid
            or c.id between ${range[0]}::uuid and ${range[1]}::uuid`;
    where.push(sql`(${ids} or coalesce(rf.name, rp.name, d.name) ilike ${pattern} escape '\\')`);
  }
  if (page.after !== undefined) {
    where.push(
      sql`(c.artifact_id, c.id) < (${page.after.artifactId}::uuid, ${page.after.id}::uuid)`,
    );
  }
  const rows = await exec.execute(sql`
    select c.id, c.artifact_type, c.artifact_id, c.status, c.path, c.size,
      c.deletion_failure_count, c.last_error, c.updated_at, l.site, l.name as location_name,
      l.location_type, coalesce(rf.name, rp.name, d.name) as artifact_name
    from physical_copy c
    join data_location l on l.id = c.location_id
    left join raw_data_file rf on c.artifact_type = 'raw_data_file' and rf.id = c.artifact_id
    left join raw_data_package rp on c.artifact_type = 'raw_data_package' and rp.id = c.artifact_id
    left join data_transfer_package d on c.artifact_type = 'data_transfer_package' and d.id = c.artifact_id
    where ${sql.join(where, sql` and `)}
    order by c.artifact_id desc, c.id desc
    limit ${page.limit}`);
  return rows.map((r) => ({
    id: String(r.id),
    artifactType: String(r.artifact_type),
    artifactId: String(r.artifact_id),
    artifactName: r.artifact_name == null ? null : String(r.artifact_name),
    location: `${String(r.site)}/${String(r.location_name)}`,
    locationType: String(r.location_type),
    status: r.status as PhysicalCopyStatus,
    path: r.path == null ? null : String(r.path),
    size: r.size == null ? null : Number(r.size),
    deletionFailureCount: Number(r.deletion_failure_count),
    lastError: r.last_error == null ? null : String(r.last_error),
    updatedAt: toDate(r.updated_at) as Date,
  }));
}
