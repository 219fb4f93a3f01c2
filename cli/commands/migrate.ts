import {
  applyDatabaseRoles,
  databaseRolesOf,
  ROLE_PREFIX_ALLOWED,
  rolesScript,
} from '../../persistence/databaseRoles.ts';
import { databaseSchemaOf } from '../../persistence/databaseSchema.ts';
import { migrate } from '../../persistence/migrate.ts';
import { describeMove } from '../../persistence/moveFromPublic.ts';
import { defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'Apply the database migrations (DATABASE_URL, else the embedded database)';

interface MigrateFlags {
  readonly json?: boolean;
  readonly printGrants?: boolean;
  readonly createRoles?: boolean;
  readonly rolePrefix?: string;
}

/**
 * `opstate migrate [--json] [--create-roles | --print-grants] [--role-prefix <name>]`: applies
 * the committed migrations (harmless to repeat, safe to race); with `--create-roles` it then
 * creates the runtime and reader roles and grants them their privileges
 * (docs/database-roles.md); `--print-grants` prints that SQL instead, connecting nowhere. The
 * factory takes the database opener so tests can hand in their own.
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
        'print {"applied", "total", "dialect", "schema"}, and "moved" after an upgrade ("roles" with --create-roles)',
      )
      .option(
        '--create-roles',
        'then create the runtime and reader roles that do not exist (needs CREATEROLE) and grant them their privileges on the schema (needs its owner); repeat after each upgrade',
      )
      .option(
        '--print-grants',
        'print the SQL that creates the migrator, runtime and reader roles and grants their privileges, for operators who manage roles themselves; connects to nothing',
      )
      .option(
        '--role-prefix <name>',
        `the roles' names are <name>_migrator, _runtime and _reader: ${ROLE_PREFIX_ALLOWED}`,
      )
      .action(
        ctx.action(async (cmd) => {
          const flags = optionsOf<MigrateFlags>(cmd);
          const schema = databaseSchemaOf(undefined);
          const roles = databaseRolesOf(flags.rolePrefix ?? schema);
          if (flags.printGrants === true) {
            ctx.io.out(rolesScript(schema, roles).trimEnd());
            return 0;
          }
          const database = await open({ io: ctx.io, creates: true });
          try {
            const { applied, total, moved } = await migrate(database);
            const granted =
              flags.createRoles === true ? await applyDatabaseRoles(database, roles) : undefined;
            const { dialect } = database;
            if (flags.json === true) {
              ctx.io.out(
                JSON.stringify({
                  applied,
                  total,
                  dialect,
                  schema: database.schema,
                  ...(moved ? { moved } : {}),
                  ...(granted ? { roles: { ...granted.roles, created: granted.created } } : {}),
                }),
              );
              return 0;
            }
            if (moved !== undefined) ctx.io.out(describeMove(moved));
            ctx.io.out(
              applied === 0
                ? `schema is current (${total} migrations, ${dialect})`
                : `applied ${applied} of ${total} migrations (${dialect})`,
            );
            if (granted !== undefined) {
              const made =
                granted.created.length === 0 ? '' : ` (created: ${granted.created.join(', ')})`;
              ctx.io.out(
                `granted ${roles.runtime} row access and ${roles.reader} read access on the ${granted.tables} tables of schema ${database.schema}${made}`,
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

export const migrateCommand = createMigrateCommand();
