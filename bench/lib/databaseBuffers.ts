/** Buffer accesses of one database, counted by the server (pg_stat_database). */
import type postgres from 'postgres';
import type { Executor } from '../../persistence/openDatabase.ts';

/**
 * The database's buffer accesses so far (`blks_hit + blks_read` of pg_stat_database), as the e2e
 * bench counts them: the work Postgres did, which does not move with the machine's speed.
 *
 * @example
 * ```ts
 * const before = await databaseBuffers(admin, name);
 * await work(); await reportStats(database);
 * const spent = (await databaseBuffers(admin, name)) - before;
 * ```
 */
export async function databaseBuffers(admin: postgres.Sql, name: string): Promise<number> {
  const [row] = await admin.unsafe(
    `select (blks_hit + blks_read)::bigint as blks from pg_stat_database where datname = $1`,
    [name],
  );
  return Number(row?.blks);
}

/**
 * Makes the connection behind `exec` report its counts now. A backend reports them lazily (at the
 * end of a transaction at most once a second, else after ten seconds idle); this one flushes them
 * before it answers (Postgres 15's `pg_stat_force_next_flush`), so a read of pg_stat_database
 * after it sees all of them. Exact only for a database opened with one connection.
 */
export async function reportStats(exec: Executor): Promise<void> {
  await exec.execute('select pg_stat_force_next_flush()');
}

/** A relation's buffer accesses so far and, for an index, the scans of it (each probe is one). */
export interface RelationReading {
  readonly buffers: number;
  readonly scans: number | undefined;
}

/**
 * The buffer accesses so far of each table and index of the database the connection is on
 * (`pg_statio_user_tables` heap and TOAST, `pg_statio_user_indexes`), with each index's scans
 * (`pg_stat_user_indexes.idx_scan`: a lookup by key, a foreign-key check and a uniqueness check
 * each count one), by relation name; a partition is counted under its parent table or index, so
 * partitions made during a run do not scatter it. Lazily reported like {@link databaseBuffers}.
 */
export async function relationBuffers(
  own: (text: string) => Promise<postgres.Row[]>,
): Promise<Map<string, RelationReading>> {
  const rows = await own(
    `with r as (
       select relid as oid, coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
              + coalesce(toast_blks_hit, 0) + coalesce(toast_blks_read, 0) as blks,
              null::bigint as scans
         from pg_statio_user_tables
       union all
       select s.indexrelid, coalesce(s.idx_blks_hit, 0) + coalesce(s.idx_blks_read, 0), u.idx_scan
         from pg_statio_user_indexes s join pg_stat_user_indexes u using (indexrelid)
     )
     select coalesce(p.relname, c.relname) as name, sum(r.blks)::bigint as blks,
            sum(r.scans)::bigint as scans
       from r
       join pg_class c on c.oid = r.oid
       left join pg_inherits i on i.inhrelid = r.oid
       left join pg_class p on p.oid = i.inhparent
      group by 1`,
  );
  return new Map(
    rows.map((row) => [
      String(row.name),
      { buffers: Number(row.blks), scans: row.scans === null ? undefined : Number(row.scans) },
    ]),
  );
}

/**
 * What each relation read between two {@link relationBuffers} readings, per operation, largest
 * first (relations that read nothing left out), rounded to a tenth; an index's scans too.
 */
export function relationBuffersPer(
  before: ReadonlyMap<string, RelationReading>,
  after: ReadonlyMap<string, RelationReading>,
  n: number,
): { relation: string; buffers_per_op: number; scans_per_op?: number }[] {
  const perOp = (x: number) => Math.round((x / n) * 10) / 10;
  return [...after]
    .map(([relation, { buffers, scans }]) => {
      const was = before.get(relation);
      const entry = { relation, buffers_per_op: perOp(buffers - (was?.buffers ?? 0)) };
      return scans === undefined
        ? entry
        : { ...entry, scans_per_op: perOp(scans - (was?.scans ?? 0)) };
    })
    .filter((r) => r.buffers_per_op > 0)
    .sort((a, b) => b.buffers_per_op - a.buffers_per_op);
}
