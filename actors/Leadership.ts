import type { Database, ReservedConnection } from '../persistence/openDatabase.ts';
import type { Clock } from './Clock.ts';
import type { Logger } from './Logger.ts';

/** Who runs the control-plane loops: exactly one process per lock name. */
export interface Leadership {
  readonly isLeader: boolean;
  /** Stops contending; a leader releases the lock (its connection) so another can take over. */
  stop(): Promise<void>;
}

export interface LeadershipOptions {
  readonly database: Database;
  /** Processes that contend for the same name elect one leader. */
  readonly name: string;
  /** How often a follower tries the lock and a leader checks that its connection still holds it. */
  readonly pollMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Called when this process becomes leader; the returned function is called when it stops. */
  readonly onElected: () => Promise<() => Promise<void>>;
}

/**
 * Elects one leader with a Postgres session advisory lock held on a reserved connection. The lock
 * lives exactly as long as that connection: a leader that dies (even by kill -9) loses it as soon
 * as Postgres sees the socket close, and a waiting process takes over on its next poll. A leader
 * whose connection fails stops its loops before anything else can run them twice.
 *
 * @example
 * ```ts
 * const leadership = startLeadership({ database, name: 'opstate', pollMs: 1000, clock, logger,
 *   onElected: async () => { const loops = startLoops(); return () => loops.stop(); } });
 * ```
 */
export function startLeadership(options: LeadershipOptions): Leadership {
  const { database, name, pollMs, clock, logger, onElected } = options;
  let leader = false;
  let stopping = false;
  const wait = new AbortController();

  const run = async () => {
    while (!stopping) {
      let conn: ReservedConnection | undefined;
      try {
        conn = await database.reserve();
        while (!stopping) {
          const [row] = await conn.execute<{ locked: boolean }>(
            `select pg_try_advisory_lock(hashtext('opstate.leader:' || '${name.replaceAll("'", "''")}')) as locked`,
          );
          if (row?.locked === true) break;
          await clock.sleep(pollMs, wait.signal);
        }
        if (stopping) break;
        leader = true;
        logger.log('INFO', 'control plane elected leader', { name });
        const resign = await onElected();
        try {
          // Hold the lock; a failed check means the connection (and so the lock) is gone.
          while (!stopping) {
            await clock.sleep(pollMs, wait.signal);
            if (stopping) break;
            await conn.execute('select 1');
          }
        } finally {
          leader = false;
          await resign();
        }
      } catch (err) {
        leader = false;
        logger.log('WARNING', 'leadership connection failed; contending again', {
          name,
          error: err instanceof Error ? err.message : String(err),
        });
        await clock.sleep(pollMs, wait.signal);
      } finally {
        if (conn !== undefined) {
          await conn
            .execute(`select pg_advisory_unlock_all()`)
            .catch(() => undefined)
            .finally(() => conn?.release());
        }
      }
    }
  };
  const done = run();
  return {
    get isLeader() {
      return leader;
    },
    async stop() {
      stopping = true;
      wait.abort();
      await done;
    },
  };
}
