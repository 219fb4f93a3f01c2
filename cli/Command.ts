import { type ParseArgsConfig, parseArgs } from 'node:util';

/** Where a command writes: injected so tests can capture output without spawning a process. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
}

export const processIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** One `opstate` sub-command. `run` returns the process exit code. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  run(args: string[], io: Io): Promise<number>;
}

/** A usage error: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** `parseArgs` with strict flags, turning its errors into usage errors. */
type Flags<T> = { args: string[]; options: T; allowPositionals: true; strict: true };

export function parseFlags<const T extends NonNullable<ParseArgsConfig['options']>>(
  args: string[],
  options: T,
): ReturnType<typeof parseArgs<Flags<T>>> {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}
