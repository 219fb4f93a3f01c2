import { sql } from 'drizzle-orm';
import type { AttentionEntryRow } from '../../machines/attention.ts';
import type { Executor } from '../openDatabase.ts';
import { filePresentAt } from '../sql/filePresentAt.ts';

/** Which unconsumed facts wait: a file of the package has no PRESENT copy at the location. */
const WAITING = sql`
  from package_files_complete e
  join raw_data_package r on r.id = e.raw_data_package_id
  join data_location l on l.id = e.location_id
  cross join lateral (
    select count(*)::int as files, count(*) filter (where not f.present)::int as missing,
      (array_agg(f.id::text || '|' || f.name order by f.id) filter (where not f.present))[1]
        as first_missing
    from (select f.id, f.name, ${filePresentAt(sql`e.location_id`)} as present
      from raw_data_file f where f.raw_data_package_id = e.raw_data_package_id) f
  ) m
  where e.packaging_operation_id is null and m.missing > 0`;

/**
 * The declared packages that wait on a file (`classifyWaitingEntry`), oldest declaration first, a
 * page of `limit` after `after` (the last row's declaration time and package id), and how many
 * there are. Reads only the unconsumed facts (a partial index holds them).
 *
 * @example
 * ```ts
 * const { rows, total } = await selectWaitingEntries(database, { limit: 50 });
 * ```
 */
export async function selectWaitingEntries(
  exec: Executor,
  page: { readonly limit: number; readonly after?: { since: Date; id: string } | undefined },
): Promise<{ rows: (AttentionEntryRow & { since: Date; id: string })[]; total: number }> {
  const after =
    page.after === undefined
      ? sql``
      : sql`and (e.declared_at, e.raw_data_package_id) > (${page.after.since.toISOString()}::timestamptz, ${page.after.id}::uuid)`;
  const read = await exec.execute(sql`
    select e.raw_data_package_id::text as id, r.name, l.site || '/' || l.name as location,
      e.declared_at, m.files, m.missing, m.first_missing
    ${WAITING} ${after}
    order by e.declared_at, e.raw_data_package_id
    limit ${page.limit}`);
  const [count] = await exec.execute(sql`select count(*)::int as n ${WAITING}`);
  const rows = read.map((r) => {
    const [fileId, ...name] = String(r.first_missing).split('|');
    const since = new Date(r.declared_at as string | Date);
    return {
      id: String(r.id),
      since,
      rawDataPackageId: String(r.id),
      packageName: String(r.name),
      location: String(r.location),
      declaredAt: since,
      files: Number(r.files),
      missing: Number(r.missing),
      firstMissing: { id: String(fileId), name: name.join('|') },
    };
  });
  return { rows, total: Number(count?.n) };
}
