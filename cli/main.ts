import { type Io, processIo, runProgram } from './Command.ts';
import { commandsFor } from './commands/index.ts';

/**
 * Runs the `opstate` command line and returns the exit code: 0 success, 1 failure, 2 usage (the
 * message says what to type instead). Every command has `--help`; every read has `--json`.
 *
 * @example
 * ```ts
 * process.exitCode = await main(['diagram']);
 * ```
 */
export async function main(argv: string[], io: Io = processIo): Promise<number> {
  return runProgram(await commandsFor(argv), argv, io);
}
