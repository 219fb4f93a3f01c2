import type { Clock } from '../machines/Clock.ts';
import { classifyFailure, type FailureClass } from '../machines/classifyFailure.ts';
import type { Logger } from '../observe/Logger.ts';
import { type LogLine, writeLines } from '../observe/LogLine.ts';

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

/** The longest wait between two failing passes. */
export const MAX_LOOP_BACKOFF_MS = 30_000;

/**
 * How long a loop waits after a pass, pure: the interval when it succeeded; after failures, the
 * interval doubled for each further one, at most ×8 and 30 s (never less than the interval), so
 * a database outage is not hammered, yet a loop is never far behind once it is over.
 *
 * @example
 * ```ts
 * [0, 1, 2, 3, 4, 9].map((f) => loopWaitMs(1000, f)); // [1000, 1000, 2000, 4000, 8000, 8000]
 * ```
 */
export function loopWaitMs(intervalMs: number, failures: number): number {
  if (failures === 0) return intervalMs;
  const backoff = intervalMs * 2 ** Math.min(Math.max(0, failures - 1), 3);
  return Math.max(intervalMs, Math.min(backoff, MAX_LOOP_BACKOFF_MS));
}

/**
 * What a loop logs about a failed pass, pure, by the failure's class: an outage once as a WARNING
 * when it starts (`inOutage` false), a pass refused for lost leadership as INFO, anything else as
 * an ERROR on its first occurrence and DEBUG while it repeats; nothing for an outage that goes on.
 *
 * @example
 * ```ts
 * passFailureLine({ name: 'relay', kind: 'outage', err, failures: 1, inOutage: false });
 * ```
 */
export function passFailureLine(input: {
  readonly name: string;
  readonly kind: FailureClass;
  /** What the pass threw: logged as `err` (type, message, stack). */
  readonly err: unknown;
  readonly failures: number;
  readonly inOutage: boolean;
}): LogLine | undefined {
  const { name, kind, err, failures } = input;
  if (kind === 'outage') {
    return input.inOutage
      ? undefined
      : {
          level: 'WARNING',
          message: `${name} cannot reach the database or broker; backing off`,
          fields: { err },
        };
  }
  if (kind === 'not_leader') {
    return {
      level: 'INFO',
      message: `${name} pass refused: this process no longer leads`,
      fields: { err },
    };
  }
  return {
    level: failures === 1 ? 'ERROR' : 'DEBUG',
    message: `${name} pass failed; retrying`,
    fields: { err, failures },
  };
}

/**
 * Runs `pass` over and over, never two at once, waiting `loopWaitMs` on the clock between passes
 * (none after a pass that says there is more, or when woken). A pass that throws is classified,
 * logged as `passFailureLine` says and retried after the backoff (a passing database or broker
 * outage must not kill the control plane); the end of an outage is logged once as INFO.
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
        const kind = classifyFailure(err);
        const line = passFailureLine({
          name,
          kind,
          err,
          failures,
          inOutage: outageSince !== undefined,
        });
        if (line !== undefined) writeLines(logger, [line]);
        if (kind === 'outage') outageSince ??= clock.now();
      }
      if (stopped) break;
      if (more || woken) continue;
      await clock.sleep(loopWaitMs(intervalMs, failures), wait.signal);
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
