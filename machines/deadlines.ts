import { describeValue } from './describeValue.ts';
import { isOperationKind, OPERATION_KINDS, type OperationKind } from './OperationKind.ts';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';

/**
 * How long one attempt of each kind may stay IN_PROGRESS, from its START, before it is aborted in
 * the worker and reset by the control plane's `deadline` path, whatever its heartbeats say (ms).
 */
export type Deadlines = Readonly<Record<OperationKind, number>>;

const HOUR = 3_600_000;

/**
 * The deadlines a deployment starts with: generous, so that they catch only a handler that hangs
 * (an S3 or tape call that never returns), never a slow one. Packaging, bundling and unpacking
 * read and write local storage: 6 h; a transfer crosses the network: 12 h; a long-term archive
 * writes to and reads back from tape or object storage, and staging recalls from it: 24 h.
 */
export const DEFAULT_DEADLINES_MS: Deadlines = Object.freeze({
  raw_data_package: 6 * HOUR,
  data_transfer_package: 6 * HOUR,
  transfer: 12 * HOUR,
  unpack: 6 * HOUR,
  long_term_archive: 24 * HOUR,
  staging: 24 * HOUR,
});

/** The longest deadline an attempt may have: 7 days. */
export const MAX_DEADLINE_MS = 7 * 24 * HOUR;

/** What a deadline may be, in words (messages and `opstate config`). */
export const DEADLINE_ALLOWED = `a whole number of milliseconds from 1 to ${MAX_DEADLINE_MS} (7 days)`;

/** The share of its deadline past which a running attempt is listed for attention. */
export const DEADLINE_NEAR_FRACTION = 0.8;

/**
 * What is wrong with a deadline (ms), or `undefined` when it is one.
 *
 * @example
 * ```ts
 * deadlineProblem(7_200_000); // undefined
 * deadlineProblem(0); // 'must be a whole number of milliseconds from 1 to 604800000 (7 days); got 0'
 * ```
 */
export function deadlineProblem(value: unknown): string | undefined {
  if (
    typeof value === 'number' &&
    Number.isSafeInteger(value) &&
    value >= 1 &&
    value <= MAX_DEADLINE_MS
  ) {
    return undefined;
  }
  return `must be ${DEADLINE_ALLOWED}; got ${describeValue(value)}`;
}

/**
 * Every kind's deadline: the defaults (`DEFAULT_DEADLINES_MS`) with the kinds `overrides` names
 * replaced. An unknown kind or a bad value is refused with `CONFIG` naming it; nothing else is
 * checked here (the configuration reads `OPSTATE_DEADLINES` into `overrides`).
 *
 * @example
 * ```ts
 * resolveDeadlines({ transfer: 2 * 3_600_000 }).transfer; // 7200000
 * resolveDeadlines({ tranfer: 1 }); // throws CONFIG: unknown operation kind 'tranfer'; …
 * ```
 */
export function resolveDeadlines(overrides: Readonly<Record<string, unknown>> = {}): Deadlines {
  const resolved: Record<OperationKind, number> = { ...DEFAULT_DEADLINES_MS };
  for (const [kind, ms] of Object.entries(overrides)) {
    if (ms === undefined) continue;
    if (!isOperationKind(kind)) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `deadline for unknown operation kind ${describeValue(kind)}; use one of ${OPERATION_KINDS.join(', ')}`,
        { details: { kind } },
      );
    }
    const problem = deadlineProblem(ms);
    if (problem !== undefined) {
      throw new OpstateError(OpstateErrorCode.CONFIG, `the deadline of ${kind} ${problem}`, {
        details: { kind, deadlineMs: ms },
      });
    }
    resolved[kind] = ms as number;
  }
  return Object.freeze(resolved);
}

/** The deadline one attempt runs under, and where it comes from. */
export interface AttemptDeadline {
  readonly ms: number;
  /** `operation`: given at submit (`deadlineMs`); `kind`: the kind's configured deadline. */
  readonly source: 'operation' | 'kind';
}

/**
 * The deadline of an attempt: the operation's own (`deadlineMs` at submit) when it has one, else
 * its kind's.
 *
 * @example
 * ```ts
 * deadlineOf(OperationKind.TRANSFER, null, timing.deadlines); // { ms: 43200000, source: 'kind' }
 * deadlineOf(OperationKind.TRANSFER, 3_000, timing.deadlines); // { ms: 3000, source: 'operation' }
 * ```
 */
export function deadlineOf(
  kind: OperationKind,
  own: number | null | undefined,
  deadlines: Deadlines,
): AttemptDeadline {
  return own === null || own === undefined
    ? { ms: deadlines[kind], source: 'kind' }
    : { ms: own, source: 'operation' };
}

/**
 * `3 s`, `90 min`, `6 h`, `24 h`, `7 d`, `1.5 h`, `250 ms`: a deadline as it was most likely
 * written (days from two on).
 *
 * @example
 * ```ts
 * formatDeadline(5_400_000); // '90 min'
 * ```
 */
export function formatDeadline(ms: number): string {
  const units: readonly [number, number, string][] = [
    [86_400_000, 2 * 86_400_000, 'd'],
    [HOUR, HOUR, 'h'],
    [60_000, 60_000, 'min'],
    [1_000, 1_000, 's'],
  ];
  for (const [size, from, unit] of units) {
    if (ms >= from && ms % size === 0) return `${ms / size} ${unit}`;
  }
  for (const [size, from, unit] of units) {
    if (ms >= from) return `${Math.round((ms / size) * 10) / 10} ${unit}`;
  }
  return `${ms} ms`;
}

/**
 * An attempt's deadline in words: `3 s (set at submit)`, `24 h (long_term_archive's)`.
 *
 * @example
 * ```ts
 * describeDeadline(kind, deadlineOf(kind, row.deadlineMs, timing.deadlines));
 * ```
 */
export function describeDeadline(kind: OperationKind, deadline: AttemptDeadline): string {
  return `${formatDeadline(deadline.ms)} (${deadline.source === 'operation' ? 'set at submit' : `${kind}'s`})`;
}

/**
 * `3.2 s`, `95 min`, `5.3 h`, `2.1 d`: how long an attempt has run, finer than its deadline.
 *
 * @example
 * ```ts
 * formatRunTime(now - startedAt.getTime()); // '3.2 s'
 * ```
 */
export function formatRunTime(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86_400).toFixed(1)} d`;
}
