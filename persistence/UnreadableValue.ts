import type { OperationError } from '../machines/operationMachine.ts';

/**
 * A stored value this build cannot read as what its column holds (a snapshot that is no lifecycle
 * snapshot, a `last_error` that is no error record): shown to an operator with the row's own text
 * instead of failing the whole read.
 *
 * @example
 * ```ts
 * for (const u of (await runtime.get(id)).unreadable) console.log(`${u.column}: ${u.reason}: ${u.raw}`);
 * // operation.last_error: an error record is an object, not a string: "{\"message\":…}"
 * ```
 */
export interface UnreadableValue {
  /** Where it is stored, as `table.column`. */
  readonly column: string;
  /** The stored JSON text, as the row holds it. */
  readonly raw: string;
  /** Why it cannot be read. */
  readonly reason: string;
}

/** The code of the stand-in error `operationErrorOf` gives for a stored error it cannot read. */
export const UNREADABLE = 'UNREADABLE';

/**
 * The JSON text of a value a driver decoded from a json/jsonb column. Both drivers decode those
 * columns, so a reader uses the value as it comes: decoding a string again read a stored `"123"`
 * as the number 123 and threw on plain text.
 */
export function rawJson(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/** Why a decoded value is not an `OperationError`, or undefined when it is one. */
export function operationErrorProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return `an error record is an object, not ${Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'null' : `a ${typeof value}`}`;
  }
  const e = value as Record<string, unknown>;
  if (typeof e.message !== 'string') return 'the error record has no message';
  if (typeof e.retryable !== 'boolean')
    return 'the error record does not say whether it is retryable';
  if (e.code !== undefined && typeof e.code !== 'string')
    return 'the error record has a code that is not text';
  return undefined;
}

/**
 * A stored error (an operation's `last_error`, a breadcrumb) as an `OperationError`. One that is
 * not an error record comes back as a stand-in with code `UNREADABLE` whose message says so and
 * carries the stored text, so every place that prints an error shows it instead of failing.
 *
 * @example
 * ```ts
 * operationErrorOf({ message: 'no such bucket', retryable: true }); // as stored
 * operationErrorOf('{"message":"x"}').code;                         // 'UNREADABLE'
 * ```
 */
export function operationErrorOf(value: unknown): OperationError {
  const problem = operationErrorProblem(value);
  if (problem === undefined) return value as OperationError;
  return {
    message: `unreadable stored error (${problem}): ${rawJson(value)}`,
    retryable: false,
    code: UNREADABLE,
  };
}
