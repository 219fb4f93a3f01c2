import { sql } from 'drizzle-orm';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { waitFor } from './waitFor.ts';

/**
 * Waits until a session of `watcher`'s database waits on a lock while running a statement whose
 * text contains `statement` (pg_stat_activity keeps only the start of a long statement, so pass
 * something near its beginning). `watcher` is a connection of its own: the waiting one is busy.
 *
 * @example
 * ```ts
 * await waitForLockWait(watcher, 'opstate_history_prune', 'the prune to wait on the claim');
 * ```
 */
export function waitForLockWait(watcher: Database, statement: string, what: string): Promise<void> {
  return waitFor(async () => {
    const [row] = await watcher.execute<{ n: number }>(sql`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'
        and position(${statement} in query) > 0`);
    return Number(row?.n) > 0;
  }, what);
}

/**
 * Runs `act` beside a claim's transaction on the operation `operationId`, on connections of its
 * own to `databaseUrl`: the row locked first (FOR UPDATE), then, once a statement whose text
 * contains `waiting` waits on a lock, the row written and the transaction committed, as a claim
 * writes the rows it locked. Resolves with what `act` does.
 *
 * @example
 * ```ts
 * const { dropped } = await besideAClaim(url, id, 'opstate_history_prune', () => retention.prune(later));
 * ```
 */
export async function besideAClaim<T>(
  databaseUrl: string,
  operationId: string,
  waiting: string,
  act: () => Promise<T>,
): Promise<T> {
  const own = await openDatabase({ databaseUrl, max: 2 });
  const claimer = await own.reserve();
  try {
    await claimer.execute('begin');
    await claimer.execute(sql`select id from operation where id = ${operationId}::uuid for update`);
    const acting = act();
    // Not left unhandled while the wait below runs; awaited after the commit.
    acting.catch(() => undefined);
    await waitForLockWait(own, waiting, `${waiting} to wait on the claim`);
    await claimer.execute(
      sql`update operation set version = version + 1 where id = ${operationId}::uuid`,
    );
    await claimer.execute('commit');
    return await acting;
  } finally {
    await claimer.execute('rollback').catch(() => {});
    await claimer.release();
    await own.close();
  }
}
