import { migrate } from '../../persistence/migrate.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { databaseFromEnv } from '../runtimeFromEnv.ts';

/**
 * `opstate migrate`: applies the committed migrations (harmless to repeat, safe to race).
 * The factory takes the database opener so tests can hand in their own.
 *
 * @example
 * ```ts
 * await createMigrateCommand(() => openDatabase({ dataDir: 'memory://' })).run([], io);
 * ```
 */
export function createMigrateCommand(open: () => Promise<Database> = databaseFromEnv): Command {
  return {
    name: 'migrate',
    summary: 'Apply the database migrations (DATABASE_URL, else PGlite in OPSTATE_DATA_DIR)',
    usage: 'opstate migrate',
    async run(args, io) {
      const { positionals } = parseFlags(args, {});
      if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
      const database = await open();
      try {
        const { applied, total } = await migrate(database);
        io.out(
          applied === 0
            ? `schema is current (${total} migrations, ${database.dialect})`
            : `applied ${applied} of ${total} migrations (${database.dialect})`,
        );
        return 0;
      } finally {
        await database.close();
      }
    },
  };
}

export const migrateCommand: Command = createMigrateCommand();
