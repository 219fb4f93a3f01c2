import { classifyFailure } from '../machines/classifyFailure.ts';
import type { Clock } from './Clock.ts';
import type { Logger } from './Logger.ts';

/** A running loop: `wake()` cuts the current wait short, `stop()` waits for the pass in progress. */
export interface Loop {
  readonly name: string;
  wake(): void;
  stop(): Promise<void>;
}

export interface LoopOptions {
  readonly name: string;
  /** Wait between passes when a pass found nothing more to do. */
  readonly intervalMs: number;
  /**
   * One pass. Return true when there is probably more work right away (a full batch): the loop
   * runs again at once instead of waiting.
   */
  readonly pass: () => Promise<boolean>;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * Runs `pass` over and over, never two at once. A pass that throws is classified, logged and
 * retried after the interval, backing off while it keeps failing (a passing database or broker
 * outage must not kill the control plane): an outage is logged once as a WARNING when it starts
 * and once as INFO when the loop recovers, a pass refused for lost leadership once as INFO, any
 * other failure as an ERROR on its first occurrence.
 *
 * @example
 * ```ts
 * const loop = startLoop({ name: 'relay', intervalMs: 100, pass: relayOnce, clock, logger });
 * loop.wake(); // new rows: run now
 * await loop.stop();
 * ```
 */
export function startLoop(options: LoopOptions): Loop {
  const { name, intervalMs, pass, clock, logger } = options;
  let stopped = false;
  let wait = new AbortController();
  let woken = false;
  const done = (async () => {
    let failures = 0;
    let outageSince: number | undefined;
    while (!stopped) {
      woken = false;
      let more = false;
      try {
        more = await pass();
        if (failures > 0 && outageSince !== undefined) {
          logger.log('INFO', `${name} recovered from the outage`, {
            afterMs: clock.now() - outageSince,
            failures,
          });
        }
        outageSince = undefined;
        failures = 0;
      } catch (err) {
        failures++;
        const error = err instanceof Error ? err.message : String(err);
        const kind = classifyFailure(err);
        if (kind === 'outage') {
          if (outageSince === undefined) {
            outageSince = clock.now();
            logger.log('WARNING', `${name} cannot reach the database or broker; backing off`, {
              error,
            });
          }
        } else if (kind === 'not_leader') {
          logger.log('INFO', `${name} pass refused: this process no longer leads`, { error });
        } else {
          logger.log(failures === 1 ? 'ERROR' : 'DEBUG', `${name} pass failed; retrying`, {
            error,
            failures,
          });
        }
      }
      if (stopped) break;
      if (more || woken) continue;
      // After failures, back off (×2 each, at most ×8 and 30 s) so a database outage is not
      // hammered, yet a loop is never far behind once it is over.
      const backoff = Math.min(intervalMs * 2 ** Math.min(Math.max(0, failures - 1), 3), 30_000);
      await clock.sleep(failures === 0 ? intervalMs : Math.max(intervalMs, backoff), wait.signal);
      if (wait.signal.aborted) wait = new AbortController();
    }
  })();
  return {
    name,
    wake() {
      woken = true;
      wait.abort();
    },
    async stop() {
      stopped = true;
      wait.abort();
      await done;
    },
  };
}
