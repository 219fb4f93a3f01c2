import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Clock } from '../machines/Clock.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import type { Logger } from '../observe/Logger.ts';
import type { LeaseFence } from '../persistence/LeaseFence.ts';
import { LeaseRepository } from '../persistence/LeaseRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';

/** Who runs the control-plane loops: at most one process per lease name at a time. */
export interface Leadership {
  readonly isLeader: boolean;
  /** This process's name in the lease (`opstate status` shows it). */
  readonly holder: string;
  /** Stops contending; a leader stops its loops and ends its lease so a standby takes over. */
  stop(): Promise<void>;
}

/** One term of leadership, handed to the loops it runs. */
export interface LeadershipTerm {
  /** What every control-plane write of this term carries: refused once the lease is lost. */
  readonly fence: LeaseFence;
  /**
   * Whether the lease surely still holds by this process's own reckoning (the last renewal's
   * send time plus the lease). A pass starts only while it does; the database fence catches the
   * rest (a process frozen in the middle of a pass).
   */
  valid(): boolean;
}

/** The lease operations leadership needs (the database's, or a test's). */
export type LeaseStore = Pick<LeaseRepository, 'acquire' | 'renew' | 'release'>;

export interface LeadershipOptions {
  readonly database: Database;
  /** Replaces the database's lease table (tests); default: a repository on `database`. */
  readonly leases?: LeaseStore;
  /** Processes that contend for the same name elect one leader. */
  readonly name: string;
  /** How often a leader renews its lease and a standby tries to take a lapsed one. */
  readonly pollMs: number;
  /** How long a lease runs without renewal (more than two polls). */
  readonly leaseMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /** This process's name in the lease; default `<host>:<pid>:<random>`. */
  readonly holder?: string;
  /** Called when this process becomes leader; the returned function is called when it stops. */
  readonly onElected: (term: LeadershipTerm) => Promise<() => Promise<void>>;
}

/**
 * Elects one leader with an expiring lease in Postgres (`control_plane_lease`). The leader renews
 * it at every poll; a standby takes it over, under a new epoch, once it has lapsed by the
 * database's clock — so a leader that dies, freezes (SIGSTOP, a paused VM, a long GC) or loses
 * the database is replaced within the lease plus one poll. A leader steps down when a renewal
 * finds another epoch, or when its own reckoning of the lease runs out before a renewal lands
 * (the database unreachable). Every control-plane write carries the term's fence and is refused
 * in the database once the epoch lost its lease, so a leader that wakes from a freeze cannot
 * apply a stale pass.
 *
 * @example
 * ```ts
 * const leadership = startLeadership({ database, name: 'opstate', pollMs: 1000, leaseMs: 10_000,
 *   clock, logger, onElected: async (term) => { const loops = startLoops(term);
 *   return () => loops.stop(); } });
 * ```
 */
export function startLeadership(options: LeadershipOptions): Leadership {
  const { name, pollMs, leaseMs, clock, logger, onElected } = options;
  const holder = options.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const leases = options.leases ?? new LeaseRepository(options.database);
  let term: { fence: LeaseFence; deadline: number; resign?: () => Promise<void> } | undefined;
  let stopping = false;
  let unreachableSince: number | undefined;
  const wait = new AbortController();

  const stepDown = async (why: string, level: 'INFO' | 'WARNING') => {
    const ending = term;
    term = undefined;
    if (ending === undefined) return;
    logger.log(level, `control plane ${why}; stepping down`, {
      name,
      holder,
      epoch: ending.fence.epoch,
    });
    await ending.resign?.();
  };

  const contend = async () => {
    const sentAt = clock.now();
    if (term === undefined) {
      const won = await leases.acquire(name, holder, leaseMs);
      if (won === undefined || stopping) return;
      const fence: LeaseFence = { name, epoch: won.epoch, holder };
      const current = { fence, deadline: sentAt + leaseMs };
      term = current;
      logger.log('INFO', 'control plane elected leader', { name, holder, epoch: won.epoch });
      let resign: () => Promise<void>;
      try {
        resign = await onElected({
          fence,
          valid: () => term === current && clock.now() < current.deadline,
        });
      } catch (err) {
        // Loops that could not start must not sit behind a lease: give it back.
        if (term === current) term = undefined;
        await leases.release(fence).catch(() => undefined);
        throw err;
      }
      if (term === current) Object.assign(current, { resign });
      else await resign();
      return;
    }
    const renewed = await leases.renew(term.fence, leaseMs);
    if (renewed === undefined) await stepDown('lost its lease to another replica', 'WARNING');
    else if (term !== undefined) term.deadline = sentAt + leaseMs;
  };

  const run = async () => {
    while (!stopping) {
      try {
        await contend();
        if (unreachableSince !== undefined) {
          logger.log('INFO', 'leadership reaches the database again', {
            name,
            afterMs: clock.now() - unreachableSince,
          });
          unreachableSince = undefined;
        }
      } catch (err) {
        const kind = classifyFailure(err);
        if (unreachableSince === undefined) {
          unreachableSince = clock.now();
          logger.log(
            kind === 'outage' ? 'WARNING' : 'ERROR',
            kind === 'outage'
              ? 'leadership cannot reach the database; retrying at every poll'
              : 'leadership poll failed; retrying at every poll',
            { name, err },
          );
        }
      }
      if (term !== undefined && clock.now() >= term.deadline) {
        await stepDown('could not renew its lease in time', 'WARNING');
      }
      if (!stopping) await clock.sleep(pollMs, wait.signal);
    }
    const ending = term;
    if (ending !== undefined) {
      await stepDown('is stopping', 'INFO');
      await leases.release(ending.fence).catch(() => undefined);
    }
  };
  const done = run();
  return {
    holder,
    get isLeader() {
      return term !== undefined && clock.now() < term.deadline;
    },
    async stop() {
      stopping = true;
      wait.abort();
      await done;
    },
  };
}
