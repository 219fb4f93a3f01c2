/** The wait before the first retry of a failed pull [250 ms]. */
export const PULL_BACKOFF_BASE_MS = 250;
/** The longest wait between retries of a failed pull [5 s]. */
export const PULL_BACKOFF_MAX_MS = 5_000;

/**
 * How long a subscription waits after `failures` pulls failed in a row (≥ 1), pure: doubling from
 * `baseMs` up to `maxMs` (250, 500, 1000, 2000, 4000, 5000, 5000 … ms by default). A queue whose
 * stream the control plane has not created yet asks about once every five seconds, not thousands
 * of times a second.
 *
 * @example
 * ```ts
 * await clock.sleep(pullBackoffMs(failures), stop.signal);
 * ```
 */
export function pullBackoffMs(
  failures: number,
  baseMs = PULL_BACKOFF_BASE_MS,
  maxMs = PULL_BACKOFF_MAX_MS,
): number {
  if (failures < 1) return 0;
  return Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
}
