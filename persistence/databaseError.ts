import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { certificateFailure } from '../machines/tlsFailure.ts';

/** The SQLSTATE codes opstate gives a meaning to (graphile-worker keeps its own `CLASH_CODES`). */
export const SqlState = {
  UNIQUE_VIOLATION: '23505',
  FOREIGN_KEY_VIOLATION: '23503',
  CHECK_VIOLATION: '23514',
  NOT_NULL_VIOLATION: '23502',
  RESTRICT_VIOLATION: '23001',
  INVALID_TEXT_REPRESENTATION: '22P02',
  INVALID_DATETIME_FORMAT: '22007',
  DATETIME_FIELD_OVERFLOW: '22008',
  NUMERIC_VALUE_OUT_OF_RANGE: '22003',
  SERIALIZATION_FAILURE: '40001',
  DEADLOCK_DETECTED: '40P01',
  LOCK_NOT_AVAILABLE: '55P03',
  UNDEFINED_TABLE: '42P01',
  /** A write on a server that takes none: a standby, or a primary made read-only. */
  READ_ONLY_SQL_TRANSACTION: '25006',
  ADMIN_SHUTDOWN: '57P01',
  /** A backend ended because another crashed; the server restarts. */
  CRASH_SHUTDOWN: '57P02',
  CANNOT_CONNECT_NOW: '57P03',
  /** No connection slot free on the server (max_connections reached): it passes. */
  TOO_MANY_CONNECTIONS: '53300',
  INVALID_AUTHORIZATION: '28000',
  INVALID_PASSWORD: '28P01',
  INSUFFICIENT_PRIVILEGE: '42501',
  /** Raised by opstate's own trigger: a retention claim on a copy whose deletion was decided. */
  CLAIM_REFUSED: 'OPS01',
  /** Raised by opstate's own trigger: a retry of an operation whose step journal was pruned. */
  JOURNAL_PRUNED: 'OPS02',
} as const;

interface DriverError {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  constraint?: unknown;
  constraint_name?: unknown;
  table?: unknown;
  table_name?: unknown;
}

/** The SQLSTATE of a postgres.js or PGlite error, or undefined for anything else. */
export function sqlStateOf(err: unknown): string | undefined {
  const code = (err as DriverError | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** What to set when Postgres refuses a connection for want of TLS or a client certificate. */
function refusalHint(message: string): string {
  if (/client certificate/i.test(message)) {
    return '; give a client certificate: OPSTATE_DATABASE_CERT_FILE and OPSTATE_DATABASE_KEY_FILE (databaseTls.certFile and keyFile when embedding)';
  }
  if (/no encryption/i.test(message)) {
    return '; the server requires TLS: set OPSTATE_DATABASE_TLS to require or verify-full';
  }
  return '';
}

/**
 * Translates a driver error into an `OpstateError` at the persistence edge, so callers branch on
 * `code` and never on driver classes or message text. An `OpstateError` passes through unchanged.
 *
 * @example
 * ```ts
 * try { await client.unsafe(text, params); } catch (err) { throw toOpstateError(err); }
 * ```
 */
export function toOpstateError(err: unknown): OpstateError {
  if (err instanceof OpstateError) return err;
  const e = (err ?? {}) as DriverError;
  const state = sqlStateOf(err);
  const message = typeof e.message === 'string' ? e.message : String(err);
  const constraint =
    typeof e.constraint_name === 'string'
      ? e.constraint_name
      : typeof e.constraint === 'string'
        ? e.constraint
        : undefined;
  const details: Record<string, unknown> = { sqlState: state, constraint };
  if (typeof e.detail === 'string') details.detail = e.detail;
  const at = constraint === undefined ? '' : ` (${constraint})`;
  const make = (code: OpstateErrorCode, text: string, retryable = false) =>
    new OpstateError(code, text, { details, retryable, cause: err });

  const certificate = certificateFailure(err);
  if (certificate !== undefined) {
    return make(
      OpstateErrorCode.CONFIG,
      `Postgres's TLS certificate does not verify (${certificate.code}: ${certificate.message}); set OPSTATE_DATABASE_CA_FILE (databaseTls.caFile when embedding) to the CA that signed it, and name the host the certificate is for`,
    );
  }
  switch (state) {
    case SqlState.INVALID_AUTHORIZATION:
    case SqlState.INVALID_PASSWORD:
      return make(
        OpstateErrorCode.CONFIG,
        `Postgres refused the connection: ${message}${refusalHint(message)}`,
      );
    case SqlState.UNIQUE_VIOLATION:
      return make(OpstateErrorCode.CONFLICT, `a row with the same key already exists${at}`);
    case SqlState.FOREIGN_KEY_VIOLATION:
      return make(
        OpstateErrorCode.BAD_INPUT,
        `a referenced row does not exist or has another kind${at}; create it first or fix the id`,
      );
    case SqlState.CHECK_VIOLATION:
    case SqlState.NOT_NULL_VIOLATION:
      return make(OpstateErrorCode.BAD_INPUT, `value refused by the database${at}: ${message}`);
    case SqlState.INVALID_TEXT_REPRESENTATION:
    case SqlState.INVALID_DATETIME_FORMAT:
    case SqlState.DATETIME_FIELD_OVERFLOW:
    case SqlState.NUMERIC_VALUE_OUT_OF_RANGE:
      return make(OpstateErrorCode.BAD_INPUT, `malformed value: ${message}`);
    case SqlState.RESTRICT_VIOLATION:
      return make(OpstateErrorCode.BAD_INPUT, message);
    case SqlState.SERIALIZATION_FAILURE:
    case SqlState.DEADLOCK_DETECTED:
    case SqlState.LOCK_NOT_AVAILABLE:
      return make(
        OpstateErrorCode.CONFLICT,
        `concurrent writers clashed, try again: ${message}`,
        true,
      );
    case SqlState.INSUFFICIENT_PRIVILEGE:
      return make(
        OpstateErrorCode.CONFIG,
        `Postgres refused: ${message}; the role opstate connects as lacks a privilege this needs (docs/database-roles.md says what each role may do; \`opstate migrate --create-roles\` grants it)`,
      );
    case SqlState.CLAIM_REFUSED:
    case SqlState.JOURNAL_PRUNED:
      return make(OpstateErrorCode.CONFLICT, message);
    case SqlState.READ_ONLY_SQL_TRANSACTION:
      // An outage, not a defect: during a failover the server a connection reached takes no
      // writes until it is promoted (or the primary it left is back). Waited out and retried.
      return make(
        OpstateErrorCode.DATABASE,
        `the database server takes no writes (a standby, or a read-only primary): ${message}; waiting for a primary. If this lasts, DATABASE_URL reaches no primary: list every host (postgres://…@primary:5432,standby:5432/db) and add target_session_attrs=read-write`,
        true,
      );
    case SqlState.TOO_MANY_CONNECTIONS:
      // An outage, not a defect: other clients hold every slot for now. Waited out and retried.
      return make(
        OpstateErrorCode.DATABASE,
        `the database server has no connection slot free: ${message}; waiting for one. If this lasts, raise the server's max_connections or run fewer processes against it`,
        true,
      );
    case SqlState.UNDEFINED_TABLE:
      return make(
        OpstateErrorCode.DATABASE,
        `${message}; the schema is missing or old: run \`opstate migrate\``,
      );
    default:
      break;
  }
  const retryable =
    state === undefined ||
    state.startsWith('08') ||
    state === SqlState.ADMIN_SHUTDOWN ||
    state === SqlState.CRASH_SHUTDOWN ||
    state === SqlState.CANNOT_CONNECT_NOW;
  return make(OpstateErrorCode.DATABASE, `database error: ${message}`, retryable);
}
