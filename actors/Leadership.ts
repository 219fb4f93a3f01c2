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
 * Elects one leader with a Postgres session advisory lock held on a session of its own. The lock
 * lives exactly as long as that session: a leader that dies (even by kill -9) loses it as soon as
 * Postgres sees the socket close, and a waiting process takes over on its next poll. A leader
 * checks at every poll that its session still holds the lock; one that lost it (the session was
 * dropped, the database restarted) stops its loops and contends again. Between the loss and that
 * check two leaders may briefly run: every loop is safe under that (compare-and-set, SKIP LOCKED,
 * deduplicated dispatch), it only does work twice.
 *
 * @example
 * ```ts
 * const leadership = startLeadership({ database, name: 'opstate', pollMs: 1000, clock, logger,
 *   onElected: async () => { const loops = startLoops(); return () => loops.stop(); } });
 * ```
 */
export function startLeadership(options: LeadershipOptions): Leadership {
  const { database, name, pollMs, clock, logger, onElected } = options;
  // A query on a connection whose socket died may never answer: give up on it after this long.
  const answerWithinMs = Math.max(2 * pollMs, 2_000);
  const ask = async (conn: ReservedConnection, query: string) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        conn.execute<Record<string, unknown>>(query),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(`the leader's connection did not answer within ${answerWithinMs} ms`),
              ),
            answerWithinMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
  let leader = false;
  let stopping = false;
  const wait = new AbortController();

  const run = async () => {
    while (!stopping) {
      let conn: ReservedConnection | undefined;
      try {
        conn = await database.session();
        while (!stopping) {
          const [row] = await ask(
            conn,
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
            // The session may have been dropped and silently replaced by a new one, which holds
            // nothing: leadership is the lock, not the connection.
            const [held] = await ask(
              conn,
              `select exists (select 1 from pg_locks where locktype = 'advisory' and granted
                 and pid = pg_backend_pid()) as held`,
            );
            if (held?.held !== true)
              throw new Error('the advisory lock is no longer held by this session');
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
          const held = conn;
          await ask(held, 'select pg_advisory_unlock_all()').catch(() => undefined);
          await Promise.resolve()
            .then(() => held.release())
            .catch(() => undefined);
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
