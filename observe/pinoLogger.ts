import { hostname } from 'node:os';
import { type DestinationStream, type Level, pino } from 'pino';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { redactUrl, redactUrlList } from '../transport/jetstream/natsCredentials.ts';
import type { Logger, LogLevel } from './Logger.ts';

/** pino's level names, lowest to highest, and `silent`. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

export interface PinoLoggerOptions {
  /** Lowest level written (default `OPSTATE_LOG_LEVEL`, else `info`). */
  readonly level?: LogLevelName;
  /** Where lines go (default stderr, written synchronously so a crash loses no line). */
  readonly destination?: DestinationStream;
  /** Values never to print (passwords, tokens): replaced by `***` wherever they appear. */
  readonly secrets?: readonly string[];
  /** Fields on every line besides `pid` and `hostname`, e.g. `{ role: 'worker' }`. */
  readonly base?: Record<string, unknown>;
}

const LEVELS: Record<LogLevel, Level> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
};

/** Keys whose value is a secret whatever it holds. */
const SECRET_KEYS = ['password', 'pass', 'token', 'seed', 'nkey', 'creds', 'authorization'];
/** Keys whose value is a connection string: shown with the password replaced. */
const URL_KEYS = ['url', 'databaseUrl', 'connectionString', 'servers'];
const REDACT_PATHS = [...SECRET_KEYS, ...URL_KEYS].flatMap((k) => [k, `*.${k}`]);

/** `scheme://user:password@` anywhere in a text. */
const URL_WITH_CREDENTIALS = /\b[a-z][a-z0-9+.-]*:\/\/[^\s@/]*@/gi;

/**
 * A text with every URL's password and every given secret replaced by `***`.
 *
 * @example
 * ```ts
 * scrubText('postgres://app:pw@db/app failed', []); // 'postgres://app:***@db/app failed'
 * ```
 */
export function scrubText(text: string, secrets: readonly string[]): string {
  let out = text.replace(URL_WITH_CREDENTIALS, (m) => redactUrl(m));
  for (const s of secrets) if (s.length > 0) out = out.split(s).join('***');
  return out;
}

/** An error's serialized text past this many characters is cut (a failed query quotes its parameters). */
const MAX_ERROR_TEXT = 8_000;
/** Arrays in a serialized error keep this many items (a failed batch's parameters). */
const MAX_ERROR_ITEMS = 20;

/** Objects `serializeError` made: pino's `err` serializer passes them through as they are. */
const serialized = new WeakSet<object>();

/** What pino's serializer takes for an error: anything with a string `message`. */
const isErrorLike = (value: unknown): value is Error =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as { message?: unknown }).message === 'string';

/**
 * An error as pino's standard serializer writes it (`errWithCause`: `type`, `message`, `stack`, its
 * own fields such as `code`, and `cause` nested the same way), scrubbed of secrets and bounded.
 */
function serializeError(err: Error, secrets: readonly string[]): Record<string, unknown> {
  const out = bounded(scrub({ ...pino.stdSerializers.errWithCause(err) }, secrets)) as Record<
    string,
    unknown
  >;
  serialized.add(out);
  return out;
}

function bounded(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') {
    return value.length <= MAX_ERROR_TEXT
      ? value
      : `${value.slice(0, MAX_ERROR_TEXT)}… (${value.length - MAX_ERROR_TEXT} more characters)`;
  }
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const kept = value.slice(0, MAX_ERROR_ITEMS).map((v) => bounded(v, depth + 1));
    return value.length > MAX_ERROR_ITEMS
      ? [...kept, `… (${value.length - MAX_ERROR_ITEMS} more items)`]
      : kept;
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, bounded(v, depth + 1)]));
}

function scrub(value: unknown, secrets: readonly string[], depth = 0): unknown {
  if (typeof value === 'string') return scrubText(value, secrets);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (serialized.has(value)) return value;
  if (value instanceof Error) return serializeError(value, secrets);
  if (Array.isArray(value)) return value.map((v) => scrub(v, secrets, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, scrub(v, secrets, depth + 1)]),
  );
}

function levelFromEnv(): LogLevelName {
  const raw = process.env.OPSTATE_LOG_LEVEL;
  if (raw === undefined || raw === '') return 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(raw)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `OPSTATE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}; got '${raw}'`,
    );
  }
  return raw as LogLevelName;
}

/**
 * A `Logger` that writes one JSON line per entry with pino: `level`, `time`, `pid`, `hostname`,
 * `msg` and the fields. An error goes in the field `err` (pino's convention) and is written by
 * pino's standard serializer, with its type, message, stack, own fields (`code`, `retryable`,
 * `details`) and cause; an error in any other field is written the same way, and its texts are
 * cut past 8,000 characters. Connection strings keep their user but lose their password,
 * secret-named fields (`password`, `token`, …) are replaced by pino's `redact`, and every value in
 * `secrets` is replaced by `***` wherever it appears, message and stack text included.
 *
 * @example
 * ```ts
 * const logger = createPinoLogger({ level: 'debug', secrets: [process.env.PGPASSWORD ?? ''] });
 * logger.log('WARNING', 'reconciler reset operation', { operationId, kind, attempt, path });
 * logger.log('ERROR', 'relay pass failed; retrying', { err }); // err.type, err.message, err.stack
 * ```
 */
export function createPinoLogger(options: PinoLoggerOptions = {}): Logger & {
  readonly pino: pino.Logger;
} {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 3);
  const instance = pino(
    {
      level: options.level ?? levelFromEnv(),
      base: { pid: process.pid, hostname: hostname(), ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: {
        // Lines written through `log` arrive serialized; direct `pino` calls are serialized here.
        err: (err: unknown) =>
          typeof err === 'object' && err !== null && serialized.has(err)
            ? err
            : isErrorLike(err)
              ? serializeError(err, secrets)
              : err,
      },
      redact: {
        paths: REDACT_PATHS,
        censor: (value, path) =>
          URL_KEYS.includes(path.at(-1) ?? '') && typeof value === 'string'
            ? redactUrlList(value)
            : '[redacted]',
      },
    },
    options.destination ?? pino.destination({ fd: 2, sync: true }),
  );
  return {
    pino: instance,
    log(level, message, fields) {
      const pinoLevel = LEVELS[level];
      if (!instance.isLevelEnabled(pinoLevel)) return;
      instance[pinoLevel](
        (fields === undefined ? {} : scrub(fields, secrets)) as object,
        scrubText(message, secrets),
      );
    },
  };
}
