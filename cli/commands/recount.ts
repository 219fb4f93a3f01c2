import { OperationStore } from '../../persistence/OperationStore.ts';
import { defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'Count the operations again and put the counts per kind × status back on the rows';

/**
 * `opstate recount [--json]`: the counts `opstate status`, the dashboard and the scheduler's
 * backpressure read are kept by triggers on `operation`; a write made with the triggers off
 * (`ALTER TABLE … DISABLE TRIGGER`, `session_replication_role = replica`) leaves them wrong. This
 * counts the rows (one pass over the table; writers go on meanwhile), re-bases the counts on
 * them, and prints the kinds and statuses that were wrong. JSON shape: `{"wrong": [{kind, status,
 * tallied, stored}]}`. Exit code 0 either way.
 *
 * @example
 * ```ts
 * await createRecountCommand(() => openDatabase({ dataDir: 'memory://' })).run([], io);
 * ```
 */
export function createRecountCommand(open: DatabaseOpener = databaseFromEnv) {
  return defineCommand('recount', SUMMARY, (program, ctx) => {
    program
      .command('recount')
      .description(SUMMARY)
      .option('--json', 'print {"wrong": [{kind, status, tallied, stored}]}')
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const database = await open({ io: ctx.io });
          try {
            const wrong = await new OperationStore(database).recountCounts();
            if (json === true) {
              ctx.io.out(JSON.stringify({ wrong }));
            } else if (wrong.length === 0) {
              ctx.io.out('the counts matched the operations stored; nothing changed');
            } else {
              for (const w of wrong) {
                ctx.io.out(
                  `${w.kind} ${w.status}: the counts said ${w.tallied}, ${w.stored} stored`,
                );
              }
              ctx.io.out(`${wrong.length} of the counts put back on the rows`);
            }
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const recountCommand = createRecountCommand();
