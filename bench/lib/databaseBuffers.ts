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
