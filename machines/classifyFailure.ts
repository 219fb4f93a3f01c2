import { OpstateError, OpstateErrorCode } from './OpstateError.ts';

/**
 * What a failure means to the code that caught it, decided before it is handled:
 * - `lost_race`: another writer moved first (`STALE_ATTEMPT`, `CONFLICT`, `INVALID_EVENT`) —
 *   routine, nothing to recover, logged quietly if at all;
 * - `not_leader`: a control-plane write made after this process lost its leadership lease;
 * - `outage`: the database or the broker is unreachable or restarting (a retryable `DATABASE` or
 *   `TRANSPORT` error, or a socket error) — back off and say so once;
 * - `refused`: bad input, a missing record, a configuration or safety rule, a handler result that
 *   breaks its kind's output contract, an attempt past its deadline — the caller's to fix (a
 *   deadline's by the next attempt), never an outage to wait out;
 * - `defect`: anything else, a bug to report.
 */
export type FailureClass = 'lost_race' | 'not_leader' | 'outage' | 'refused' | 'defect';

const LOST_RACES: readonly string[] = [
  OpstateErrorCode.STALE_ATTEMPT,
  OpstateErrorCode.CONFLICT,
  OpstateErrorCode.INVALID_EVENT,
];
const REFUSALS: readonly string[] = [
  OpstateErrorCode.BAD_INPUT,
  OpstateErrorCode.NOT_FOUND,
  OpstateErrorCode.CONFIG,
  OpstateErrorCode.SNAPSHOT_VERSION,
  OpstateErrorCode.UNSAFE,
  OpstateErrorCode.OUTPUT_CONTRACT,
  OpstateErrorCode.DEADLINE_PASSED,
];
/** Socket and driver codes that mean "the server is not there right now". */
const OUTAGE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * Classifies a caught failure (see `FailureClass`).
 *
 * @example
 * ```ts
 * try { await store.apply(id, reset, { fence }); }
 * catch (err) { if (classifyFailure(err) !== 'lost_race') throw err; }
 * ```
 */
export function classifyFailure(err: unknown): FailureClass {
  if (err instanceof OpstateError) {
    if (LOST_RACES.includes(err.code)) return 'lost_race';
    if (err.code === OpstateErrorCode.NOT_LEADER) return 'not_leader';
    if (REFUSALS.includes(err.code)) return 'refused';
    if (err.retryable) return 'outage';
    return err.cause === undefined ? 'defect' : classifyFailure(err.cause);
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && OUTAGE_CODES.has(code)) return 'outage';
  return 'defect';
}
