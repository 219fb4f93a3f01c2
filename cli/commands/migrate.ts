import { migrate } from '../../persistence/migrate.ts';
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
      .option('--json', 'print {"applied", "total", "dialect"}')
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const database = await open({ io: ctx.io, creates: true });
          try {
            const { applied, total } = await migrate(database);
            ctx.io.out(
              json === true
                ? JSON.stringify({ applied, total, dialect: database.dialect })
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
