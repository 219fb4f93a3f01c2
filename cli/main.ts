import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { type Command, type Io, processIo, UsageError } from './Command.ts';
import { commands } from './commands/index.ts';

function help(io: Io): void {
  io.out('opstate: durable pipeline operations (XState lifecycle, Postgres, NATS JetStream)');
  io.out('');
  io.out('Usage: opstate <command> [options]');
  io.out('');
  const width = Math.max(...commands.map((c) => c.name.length));
  for (const c of commands) io.out(`  ${c.name.padEnd(width)}  ${c.summary}`);
  io.out('');
  io.out(
    'Environment: DATABASE_URL (else embedded PGlite in OPSTATE_DATA_DIR, default ./.opstate),',
  );
  io.out('             NATS_URL (else the in-process transport).');
  io.out('Run `opstate <command> --help` for a command’s options.');
}

/**
 * Runs the `opstate` command line and returns the exit code: 0 success, 1 failure, 2 usage.
 *
 * @example
 * ```ts
 * process.exitCode = await main(['diagram']);
 * ```
 */
export async function main(argv: string[], io: Io = processIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    help(io);
    return name === undefined ? 2 : 0;
  }
  const command: Command | undefined = commands.find((c) => c.name === name);
  if (command === undefined) {
    io.err(`opstate: unknown command '${name}'. Run 'opstate --help' for the list.`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(`Usage: ${command.usage}`);
    io.out(command.summary);
    return 0;
  }
  try {
    return await command.run(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`opstate ${name}: ${err.message}`);
      io.err(`Usage: ${command.usage}`);
      return 2;
    }
    if (err instanceof OpstateError) {
      io.err(`opstate ${name}: ${err.message} [${err.code}]`);
      // A bad setting is a usage error: the message says what to set instead.
      return err.code === OpstateErrorCode.CONFIG ? 2 : 1;
    }
    throw err;
  }
}
