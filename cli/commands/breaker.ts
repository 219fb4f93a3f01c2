import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { databaseFromEnv } from '../runtimeFromEnv.ts';

/**
 * `opstate breaker reset <kind> <location id>`: an operator closes a circuit breaker (failures to
 * zero), so the scheduler takes up the pair's parked operations on its next pass. `opstate status`
 * lists the breakers that are not closed, with their location ids.
 *
 * @example
 * ```ts
 * await createBreakerCommand(() => Promise.resolve(database))
 *   .run(['reset', 'long_term_archive', archiveId], io);
 * ```
 */
export function createBreakerCommand(open: () => Promise<Database> = databaseFromEnv): Command {
  return {
    name: 'breaker',
    summary: 'Close a circuit breaker by hand (scheduling of its kind and location resumes)',
    usage: 'opstate breaker reset <kind> <location id>',
    async run(args, io) {
      const { positionals } = parseFlags(args, {});
      const [action, kind, locationId, extra] = positionals;
      if (action !== 'reset') {
        throw new UsageError(
          action === undefined ? 'say what to do: reset' : `unknown action '${action}'; use reset`,
        );
      }
      if (kind === undefined || locationId === undefined) {
        throw new UsageError('the kind and the location id are required');
      }
      if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
      const database = await open();
      try {
        const before = await new CircuitBreakerRepository(database).reset(kind, locationId);
        if (before === null) {
          io.out(`no circuit breaker for ${kind} at ${locationId}: nothing to reset`);
        } else {
          io.out(
            `${kind} at ${before.location}: ${before.state} → CLOSED (${before.consecutiveFailures} consecutive failures cleared)`,
          );
        }
        return 0;
      } finally {
        await database.close();
      }
    },
  };
}

export const breakerCommand: Command = createBreakerCommand();
