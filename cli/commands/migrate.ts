import { migrate } from '../../persistence/migrate.ts';
import { describeMove } from '../../persistence/moveFromPublic.ts';
import { defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'Apply the database migrations (DATABASE_URL, else the embedded database)';

/**
 * `opstate migrate [--json]`: applies the committed migrations (harmless to repeat, safe to
 * race). The factory takes the database opener so tests can hand in their own.
 *
 * @example
 * ```ts
 * await createMigrateCommand(() => openDatabase({ dataDir: 'memory://' })).run([], io);
 * ```
 */
export function createMigrateCommand(open: DatabaseOpener = databaseFromEnv) {
  return defineCommand('migrate', SUMMARY, (program, ctx) => {
    program
      .command('migrate')
      .description(SUMMARY)
      .option(
        '--json',
        'print {"applied", "total", "dialect", "schema"}, and "moved" after an upgrade',
      )
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const database = await open({ io: ctx.io, creates: true });
          try {
            const { applied, total, moved } = await migrate(database);
            const { dialect, schema } = database;
            if (moved !== undefined && json !== true) ctx.io.out(describeMove(moved));
            ctx.io.out(
              json === true
                ? JSON.stringify({ applied, total, dialect, schema, ...(moved ? { moved } : {}) })
                : applied === 0
                  ? `schema is current (${total} migrations, ${database.dialect})`
                  : `applied ${applied} of ${total} migrations (${database.dialect})`,
            );
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const migrateCommand = createMigrateCommand();
