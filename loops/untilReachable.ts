import type { Clock } from '../machines/Clock.ts';
import { classifyFailure } from '../machines/classifyFailure.ts';
import type { Logger, LogLevel } from '../observe/Logger.ts';

/** Retry pacing while a server is unreachable at start. */
export interface ReachOptions {
  readonly logger: Logger;
  readonly clock: Clock;
  /** First wait between tries [250 ms]; doubles up to `maxBackoffMs`. */
  readonly initialBackoffMs?: number;
  /** Longest wait between tries [10 s]. */
  readonly maxBackoffMs?: number;
  /** Told of every failed try (the error's message), e.g. for a readiness probe. */
  readonly onWait?: (error: string) => void;
  /**
   * Asked before each wait: a reason to stop waiting (the last failure is then thrown), e.g. the
   * process is stopping or no longer holds what it writes for. Default: wait for ever.
   */
  readonly giveUp?: () => string | undefined;
  /** Cuts a wait between tries short (then `giveUp` is asked again), e.g. the process stopping. */
  readonly signal?: AbortSignal;
  /** What the INFO line says comes next once it is reachable again [starting]. */
  readonly reachedThen?: string;
  /** Level of the line saying it waits [WARNING]; one caller among many may say it quieter. */
  readonly waitLevel?: LogLevel;
}

/**
 * Runs `attempt` until it succeeds, waiting out outages: a failure classified as an outage (the
 * server refuses or drops the connection, a timeout) is logged as a WARNING — on the first try,
 * then about once a minute, with how long it has been waiting — and retried with capped
 * exponential backoff. Any other failure (a configuration error, a refused input) is thrown at
 * once: that is what makes a process exit.
 *
 * @example
 * ```ts
 * await untilReachable('Postgres', () => migrate(database), { logger, clock });
 * ```
 */
export async function untilReachable<T>(
  what: string,
  attempt: () => Promise<T>,
  options: ReachOptions,
): Promise<T> {
  const { logger, clock } = options;
  const first = options.initialBackoffMs ?? 250;
  const cap = options.maxBackoffMs ?? 10_000;
  const since = clock.now();
  let tries = 0;
  let lastLog = Number.NEGATIVE_INFINITY;
  for (;;) {
    try {
      const result = await attempt();
      if (tries > 0) {
        logger.log('INFO', `${what} reachable; ${options.reachedThen ?? 'starting'}`, {
          waitedMs: clock.now() - since,
          tries: tries + 1,
        });
      }
      return result;
    } catch (err) {
      if (classifyFailure(err) !== 'outage') throw err;
      const stop = options.giveUp?.();
      if (stop !== undefined) {
        logger.log('WARNING', `${what} unreachable; no longer waiting: ${stop}`, {
          err,
          waitedMs: clock.now() - since,
        });
        throw err;
      }
      tries++;
      options.onWait?.(err instanceof Error ? err.message : String(err));
      const backoff = Math.min(cap, first * 2 ** Math.min(tries - 1, 16));
      if (clock.now() - lastLog >= 60_000) {
        lastLog = clock.now();
        logger.log(
          options.waitLevel ?? 'WARNING',
          `${what} unreachable; waiting for it and retrying`,
          {
            err,
            waitedMs: clock.now() - since,
            nextTryInMs: backoff,
            maxBackoffMs: cap,
          },
        );
      }
      await clock.sleep(backoff, options.signal);
    }
  }
}
