const UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** The forms `durationMs` reads, for messages. */
export const DURATION_FORMS = '500ms, 30s, 5m, 2h or 1d';

/**
 * A duration as an operator writes it, in milliseconds: `500ms`, `30s`, `5m`, `2h`, `1.5d` (a
 * bare number is `bare`, seconds unless said otherwise); `undefined` for anything else.
 *
 * @example
 * ```ts
 * durationMs('6h'); // 21600000
 * durationMs('7200000', 'ms'); // 7200000
 * durationMs('soon'); // undefined
 * ```
 */
export function durationMs(value: string, bare: 'ms' | 's' = 's'): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (m === null) return undefined;
  return Math.round(Number(m[1]) * (UNITS[m[2] ?? bare] as number));
}
