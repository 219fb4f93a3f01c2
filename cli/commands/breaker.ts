import { CircuitBreakerRepository } from '../../persistence/CircuitBreakerRepository.ts';
import { argumentsOf, type Command, defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'Close a circuit breaker by hand (scheduling of its kind and location resumes)';

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
export function createBreakerCommand(open: DatabaseOpener = databaseFromEnv): Command {
  return defineCommand('breaker', SUMMARY, (program, ctx) => {
    const breaker = program.command('breaker').description(SUMMARY);
    breaker
      .command('reset')
      .description('Close the breaker of a kind at a location')
      .argument('<kind>', 'the operation kind, e.g. long_term_archive')
      .argument('<location-id>', 'the location, as `opstate status` lists it')
      .option('--json', 'print {"kind", "locationId", "before"}')
      .action(
        ctx.action(async (cmd) => {
          const [kind, locationId] = argumentsOf(cmd) as [string, string];
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const database = await open({ io: ctx.io });
          try {
            const before = await new CircuitBreakerRepository(database).reset(kind, locationId);
            if (json === true) {
              ctx.io.out(
                JSON.stringify({
                  kind,
                  locationId,
                  before:
                    before === null
                      ? null
                      : { state: before.state, consecutiveFailures: before.consecutiveFailures },
                }),
              );
            } else if (before === null) {
              ctx.io.out(`no circuit breaker for ${kind} at ${locationId}: nothing to reset`);
            } else {
              ctx.io.out(
                `${kind} at ${before.location}: ${before.state} → CLOSED (${before.consecutiveFailures} consecutive failures cleared)`,
              );
            }
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const breakerCommand: Command = createBreakerCommand();
