import { CommanderError, InvalidArgumentError, Command as Program } from 'commander';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { buildInfo } from '../observe/buildInfo.ts';

/** Where a command writes: injected so tests can capture output without spawning a process. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
}

export const processIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** A usage error found after parsing (a bad kind, bad JSON): exit code 2, with what to type. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * A command that cannot do its work for a reason the message names with its fix (no database to
 * read, a port already in use): exit code 1, the one line alone, no stack.
 */
export class CommandFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandFailure';
  }
}

/** What a command's registration gets: the output, and the wrapper that turns results into exit codes. */
export interface CommandContext {
  readonly io: Io;
  /**
   * Wraps an action: it receives the parsed command (`cmd.processedArgs`, `cmd.opts()`), and the
   * exit code it returns becomes the run's.
   */
  action(fn: (cmd: Program) => Promise<number>): (...args: unknown[]) => Promise<void>;
}

/** One `opstate` sub-command (it may have sub-commands of its own, e.g. `location add`). */
export interface Command {
  readonly name: string;
  readonly summary: string;
  /** Adds the command, its arguments, options, sub-commands and actions to the program. */
  register(program: Program, context: CommandContext): void;
  /** Runs `opstate <name> …argv` with this command alone and returns the exit code. */
  run(argv: string[], io: Io): Promise<number>;
}

/**
 * Declares a command on commander.
 *
 * @example
 * ```ts
 * export const diagramCommand = defineCommand('diagram', 'Print the lifecycle', (program, ctx) => {
 *   program.command('diagram').description('Print the lifecycle').option('--json')
 *     .action(ctx.action(async (cmd) => { ctx.io.out(toMermaid(operationMachine)); return 0; }));
 * });
 * ```
 */
export function defineCommand(
  name: string,
  summary: string,
  register: Command['register'],
): Command {
  const command: Command = {
    name,
    summary,
    register,
    run: (argv, io) => runProgram([command], [name, ...argv], io),
  };
  return command;
}

/** Exit codes: 0 ok, 1 failure, 2 usage (the message says what to type instead). */
export const EXIT = { OK: 0, FAILURE: 1, USAGE: 2 } as const;

const USAGE_CODES = new Set<string>([OpstateErrorCode.CONFIG, OpstateErrorCode.BAD_INPUT]);

/** The program over some commands, writing to `io`, never exiting the process itself. */
export function createProgram(
  commands: readonly Command[],
  io: Io,
): { program: Program; exitCode: () => number } {
  let code: number = EXIT.OK;
  const program = new Program('opstate')
    .description(
      'opstate: durable pipeline operations (XState lifecycle, Postgres, NATS JetStream)',
    )
    .usage('<command> [options]')
    .version(buildInfo().version, '-V, --version', 'print the version of opstate')
    .exitOverride()
    // An option after a sub-command belongs to it (`policy set --json` is set's --json).
    .enablePositionalOptions()
    .showSuggestionAfterError()
    .configureOutput({
      writeOut: (text) => io.out(text.replace(/\n$/, '')),
      writeErr: (text) => io.err(text.replace(/\n$/, '')),
      outputError: (text, write) =>
        write(text.startsWith('error: ') ? `opstate: ${text.slice(7)}` : text),
    });
  program.configureHelp({ sortSubcommands: false });
  program.addHelpText(
    'after',
    [
      '',
      'Exit codes: 0 ok, 1 failure, 2 usage. Configuration comes from the environment: run',
      "'opstate config' to see it (DATABASE_URL, else an embedded Postgres in OPSTATE_DATA_DIR,",
      'which a read never creates; NATS_URL, without which worker and control-plane start only',
      'with --in-process). Each command says on stderr which it uses. Every read takes --json.',
    ].join('\n'),
  );
  const context: CommandContext = {
    io,
    action:
      (fn) =>
      async (...args) => {
        code = await fn(args.at(-1) as Program);
      },
  };
  for (const c of commands) c.register(program, context);
  // After a usage error, every command names its own help.
  const hint = (cmd: Program, path: string) => {
    cmd.showHelpAfterError(`Run 'opstate ${path}--help' for its usage.`);
    for (const sub of cmd.commands) hint(sub, `${path}${sub.name()} `);
  };
  hint(program, '');
  return { program, exitCode: () => code };
}

/**
 * Parses `argv` (without `node` and the script) over the commands and runs the one named:
 * 0 ok, 1 failure, 2 usage — `--help` and `--version` are 0, a parse error or a `UsageError` is 2
 * with what to type instead, a `CommandFailure` is 1, an `OpstateError` is 1 (2 for a bad
 * setting or input) with its code.
 *
 * @example
 * ```ts
 * process.exitCode = await runProgram(commands, ['status', '--json'], processIo);
 * ```
 */
export async function runProgram(
  commands: readonly Command[],
  argv: readonly string[],
  io: Io,
): Promise<number> {
  const { program, exitCode } = createProgram(commands, io);
  if (argv.length === 0) {
    io.out(program.helpInformation().replace(/\n$/, ''));
    return EXIT.USAGE;
  }
  const name = argv[0] ?? '';
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode();
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    if (err instanceof UsageError) {
      io.err(`opstate ${name}: ${err.message}`);
      io.err(`Run 'opstate ${name} --help' for its usage.`);
      return EXIT.USAGE;
    }
    if (err instanceof CommandFailure) {
      io.err(`opstate ${name}: ${err.message}`);
      return EXIT.FAILURE;
    }
    if (err instanceof OpstateError) {
      io.err(`opstate ${name}: ${err.message} [${err.code}]`);
      return USAGE_CODES.has(err.code) ? EXIT.USAGE : EXIT.FAILURE;
    }
    throw err;
  }
}

/** `--concurrency 8`, `--limit 50`: a whole number at least `min`, else a usage error. */
export function wholeNumber(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`use a whole number ≥ ${min}`);
    }
    return n;
  };
}

/** The options commander parsed, typed by the caller. */
export function optionsOf<T>(cmd: Program): T {
  return cmd.opts<T & Record<string, unknown>>();
}

/** The positional arguments commander parsed. */
export function argumentsOf(cmd: Program): string[] {
  return cmd.processedArgs as string[];
}
