import type { Logger, LogLevel } from './Logger.ts';

/**
 * A log line a pure decision asks for; the loop that ran the decision writes it. Keeps what a
 * pass says testable without a logger.
 *
 * @example
 * ```ts
 * const lines: LogLine[] = [{ level: 'WARNING', message: 'reconciler reset operation', fields }];
 * writeLines(logger, lines);
 * ```
 */
export interface LogLine {
  readonly level: LogLevel;
  readonly message: string;
  readonly fields?: Record<string, unknown>;
}

/** Writes the lines a decision asked for, in order. */
export function writeLines(logger: Logger, lines: readonly LogLine[]): void {
  for (const l of lines) logger.log(l.level, l.message, l.fields);
}
