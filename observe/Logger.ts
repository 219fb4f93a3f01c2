import { systemClock } from '../machines/Clock.ts';

/** Log levels opstate writes; WARNING marks something an operator should look at. */
export type LogLevel = 'DEBUG' | 'INFO' | 'WARNING' | 'ERROR';

/** A structured log line: a message plus fields. */
export interface Logger {
  log(level: LogLevel, message: string, fields?: Record<string, unknown>): void;
}

/** An error in a field, as a line of text can hold it (JSON.stringify writes an Error as `{}`). */
const errorText = (_key: string, value: unknown) =>
  value instanceof Error
    ? {
        type: value.name,
        message: value.message,
        ...('code' in value && value.code !== undefined ? { code: value.code } : {}),
      }
    : value;

/**
 * Writes one line per entry to stderr: `<time> <LEVEL> <message> {fields}`, an error field (`err`)
 * as its type, message and code. DEBUG lines are dropped unless `OPSTATE_DEBUG` is set.
 *
 * @example
 * ```ts
 * consoleLogger.log('WARNING', 'reconciler reset operation', { operationId, reason });
 * ```
 */
export const consoleLogger: Logger = {
  log(level, message, fields) {
    if (level === 'DEBUG' && !process.env.OPSTATE_DEBUG) return;
    const tail =
      fields && Object.keys(fields).length > 0 ? ` ${JSON.stringify(fields, errorText)}` : '';
    process.stderr.write(
      `${new Date(systemClock.now()).toISOString()} ${level} ${message}${tail}\n`,
    );
  },
};

/** Keeps lines in memory (tests, and the demo's report). */
export function memoryLogger(): Logger & {
  readonly lines: { level: LogLevel; message: string; fields: Record<string, unknown> }[];
} {
  const lines: { level: LogLevel; message: string; fields: Record<string, unknown> }[] = [];
  return { lines, log: (level, message, fields = {}) => lines.push({ level, message, fields }) };
}
