import { sql } from 'drizzle-orm';
import type { Executor } from '../openDatabase.ts';

/**
 * The ids of the registered locations among `locations`, keyed `site/name`; a location not
 * registered is absent.
 *
 * @example
 * ```ts
 * const ids = await selectLocationIds(database, [{ site: 'obs', name: 'source' }]);
 * ids.get('obs/source');
 * ```
 */
export async function selectLocationIds(
  exec: Executor,
  locations: readonly { readonly site: string; readonly name: string }[],
): Promise<Map<string, string>> {
  if (locations.length === 0) return new Map();
  const rows = await exec.execute(sql`
    select d.id, d.site, d.name from data_location d
    join jsonb_to_recordset(${JSON.stringify(locations)}::jsonb) as w(site text, name text)
      on d.site = w.site and d.name = w.name`);
  return new Map(rows.map((r) => [`${String(r.site)}/${String(r.name)}`, String(r.id)]));
}
