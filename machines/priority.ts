/** The lowest priority an operation may be submitted with. */
export const MIN_PRIORITY = -100;
/** The highest priority: also the one an operation waiting past the starvation age is claimed at. */
export const MAX_PRIORITY = 100;
/** The priority of an operation submitted without one. */
export const DEFAULT_PRIORITY = 0;
/**
 * How long a due operation may wait before the scheduler claims it as if at `MAX_PRIORITY`,
 * whatever its own: 15 minutes (the control plane's `starvationAgeMs` timer).
 */
export const DEFAULT_STARVATION_AGE_MS = 15 * 60_000;

/** What a `priority` must be, as messages say it. */
export const PRIORITY_ALLOWED = `a whole number from ${MIN_PRIORITY} to ${MAX_PRIORITY} (higher first; default ${DEFAULT_PRIORITY})`;

/**
 * What is wrong with a priority, or undefined for a good one.
 *
 * @example
 * ```ts
 * priorityProblem(7); // undefined
 * priorityProblem(500); // 'must be a whole number from -100 to 100 …; got 500'
 * ```
 */
export function priorityProblem(value: unknown): string | undefined {
  if (
    typeof value === 'number' &&
    Number.isInteger(value) &&
    value >= MIN_PRIORITY &&
    value <= MAX_PRIORITY
  ) {
    return undefined;
  }
  return `must be ${PRIORITY_ALLOWED}; got ${typeof value === 'string' ? `'${value}'` : String(value)}`;
}
