import { InvalidArgumentError } from 'commander';
import { systemClock } from '../machines/Clock.ts';
import { durationMs } from '../machines/durationMs.ts';

/**
 * A duration as an operator types it: `500ms`, `30s`, `5m`, `2h`, `1d` (a bare number is seconds).
 * A bad one is commander's usage error, naming the forms allowed.
 *
 * @example
 * ```ts
 * parseDuration('5m'); // 300000
 * ```
 */
export function parseDuration(value: string): number {
  const ms = durationMs(value);
  if (ms === undefined) {
    throw new InvalidArgumentError('use a duration such as 30s, 5m, 2h or 1d');
  }
  // '9999…9d' is a duration in form only: its milliseconds are Infinity or past exact integers.
  if (!Number.isSafeInteger(ms)) {
    throw new InvalidArgumentError(
      'use a duration such as 30s, 5m, 2h or 1d; that one is too long',
    );
  }
  return ms;
}

/** A time `now ± ms` names, or undefined past what a Date holds (±100,000,000 days of 1970). */
function dateOf(ms: number): Date | undefined {
  const at = new Date(ms);
  return Number.isNaN(at.getTime()) ? undefined : at;
}

/**
 * A point in time: an ISO timestamp (`2026-11-30T12:00:00Z`) or a duration ago (`2h`).
 *
 * @example
 * ```ts
 * parseSince('1d'); // a Date one day ago
 * ```
 */
export function parseSince(value: string, now = systemClock.now()): Date {
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const at = new Date(value);
    if (Number.isNaN(at.getTime())) {
      throw new InvalidArgumentError(
        'use an ISO time such as 2026-11-30T12:00:00Z, or an age such as 2h',
      );
    }
    return at;
  }
  const ms = durationMs(value);
  const at = ms === undefined ? undefined : dateOf(now - ms);
  if (at === undefined) {
    throw new InvalidArgumentError(
      'use an ISO time such as 2026-11-30T12:00:00Z, or an age such as 2h',
    );
  }
  return at;
}

/**
 * When a delayed start begins: an ISO date-time with its zone (`2026-12-05T18:00:00Z`, passed on
 * as typed for the store to check) or a delay from now (`10m`, `2h`).
 *
 * @example
 * ```ts
 * parseNotBefore('10m'); // an ISO time ten minutes from now
 * ```
 */
export function parseNotBefore(value: string, now = systemClock.now()): string {
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) return value;
  const ms = durationMs(value);
  const at = ms === undefined ? undefined : dateOf(now + ms);
  if (at === undefined) {
    throw new InvalidArgumentError(
      'use an ISO time with its zone such as 2026-12-05T18:00:00Z, or a delay such as 10m',
    );
  }
  return at.toISOString();
}
