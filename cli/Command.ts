import { parseArgs } from 'node:util';

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
  /** More lines for `opstate <command> --help`: what each option means. */
  readonly help?: readonly string[];
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
export function parseFlags<const T extends NonNullable<Parameters<typeof parseArgs>[0]>['options']>(
  args: string[],
  options: T,
) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}
