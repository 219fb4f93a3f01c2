import { sql } from 'drizzle-orm';
import type { Database } from '../../persistence/openDatabase.ts';
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
