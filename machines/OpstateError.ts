/**
 * Every error opstate raises carries one of these codes, so callers branch on `err.code`, never on
 * message text. The message itself says how to fix the problem.
 */
export const OpstateErrorCode = {
  /** A snapshot was written by a machine id or version this build does not know. */
  SNAPSHOT_VERSION: 'SNAPSHOT_VERSION',
  /** An event the lifecycle machine does not accept in the operation's current state. */
  INVALID_EVENT: 'INVALID_EVENT',
  /** A worker event whose attempt is not the operation's current attempt. */
  STALE_ATTEMPT: 'STALE_ATTEMPT',
  /** A compare-and-set lost against a concurrent writer. */
  CONFLICT: 'CONFLICT',
  /** No operation (or other record) with that id. */
  NOT_FOUND: 'NOT_FOUND',
  /** Input that fails validation: unknown kind, malformed message, bad id. */
  BAD_INPUT: 'BAD_INPUT',
  /** A configuration that breaks an invariant (for example the timer order). */
  CONFIG: 'CONFIG',
  /** A transport-level failure (broker unreachable, stream missing). */
  TRANSPORT: 'TRANSPORT',
  /** A database-level failure that is not one of the above. */
  DATABASE: 'DATABASE',
  /**
   * A control-plane write refused because this process no longer holds the leadership lease it
   * was made under (another replica took over): stop the pass and contend again.
   */
  NOT_LEADER: 'NOT_LEADER',
  /** A safety rule refused a destructive step (archive-then-delete). */
  UNSAFE: 'UNSAFE',
  /**
   * A handler's result lacks an output its kind must produce (`OUTPUT_CONTRACT` in
   * `outputContract.ts`): the attempt fails for good, since running the same handler again would
   * return the same result.
   */
  OUTPUT_CONTRACT: 'OUTPUT_CONTRACT',
  /**
   * An attempt ran past its deadline (`deadlineMs` at submit, else its kind's): the reason its
   * handler's `ctx.signal` fires with. The control plane resets the attempt (`deadline`); a later
   * attempt may run in time, so it is retryable.
   */
  DEADLINE_PASSED: 'DEADLINE_PASSED',
} as const;

export type OpstateErrorCode = (typeof OpstateErrorCode)[keyof typeof OpstateErrorCode];

/**
 * The one error base class. `code` says what went wrong, `details` carries the data an operator or
 * caller needs, `retryable` says whether trying again can help.
 *
 * @example
 * ```ts
 * try { await store.apply(id, event); }
 * catch (err) { if (err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT) retry(); }
 * ```
 */
export class OpstateError extends Error {
  readonly code: OpstateErrorCode;
  readonly details: Readonly<Record<string, unknown>>;
  readonly retryable: boolean;

  constructor(
    code: OpstateErrorCode,
    message: string,
    options: { details?: Record<string, unknown>; retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OpstateError';
    this.code = code;
    this.details = Object.freeze({ ...(options.details ?? {}) });
    this.retryable = options.retryable ?? false;
  }
}
