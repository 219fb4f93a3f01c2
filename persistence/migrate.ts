import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { SqlState, sqlStateOf } from './databaseError.ts';
import { createRecord, moveFromPublic } from './moveFromPublic.ts';
import type { Database, Executor } from './openDatabase.ts';
import type { MigrateResult } from './publicRecords.ts';

export type { MigrateResult } from './publicRecords.ts';

/** The committed, drizzle-kit generated SQL. The same folder runs on Postgres 15 and PGlite. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('./migrations', import.meta.url));

/**
 * Transaction-scoped advisory lock key that serialises migrators across processes. drizzle's own
 * migrator alone races: two processes both see "not applied" and the second fails. Advisory locks
 * are per database, not per schema: deployments in two schemas of one database take turns.
 */
export const MIGRATION_LOCK_KEY = 0x6f70_7374_6d67; // 'opstmg'

/**
 * Functions left without a pinned search_path: `opstate_uuid_v7` reads no table and is the
 * column default of every insert, where a pinned setting would cost a configuration switch per row.
 */
const UNPINNED_FUNCTIONS = ['opstate_uuid_v7'];

/**
 * Brings opstate's schema (`database.schema`, default `opstate`) up to date, in one transaction
 * that first takes an advisory lock: running it twice, or from several processes at once, applies
 * each migration exactly once. Everything it creates lands in that schema, the connection's
 * search_path, and what it applied is recorded in `<schema>.__drizzle_migrations` (drizzle-kit's
 * shape), never in an application's `drizzle.__drizzle_migrations`. A deployment migrated before
 * opstate had a schema of its own is moved into it first (`moved` says so). `folder` is the
 * committed migrations unless told otherwise (an upgrade test applies an older journal first).
 *
 * @example
 * ```ts
 * const database = await openDatabase();
 * const { applied } = await migrate(database); // 0 on the second run
 * ```
 */
export async function migrate(
  database: Database,
  folder: string = MIGRATIONS_FOLDER,
): Promise<MigrateResult> {
  const { schema } = database;
  const migrations = readMigrationFiles({ migrationsFolder: folder });
  return database.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    // Only what is missing is created: on a current schema the migrator runs no DDL at all, so a
    // role without it (the runtime role of docs/database-roles.md) starts as the migrator would.
    if (!(await exists(tx, `select to_regnamespace('${schema}')`))) {
      await tx.execute(`create schema if not exists ${schema}`);
    }
    await refuseOtherSearchPath(tx, schema);
    const moved = await moveFromPublic(tx, schema, migrations);
    if (!(await exists(tx, `select to_regclass('${schema}.__drizzle_migrations')`))) {
      await createRecord(tx, schema);
    }
    const [last] = await tx.execute<{ created_at: string | number | null }>(
      `select created_at from ${schema}.__drizzle_migrations order by created_at desc limit 1`,
    );
    const lastMillis = last?.created_at == null ? -1 : Number(last.created_at);
    const pending = migrations.filter((m) => m.folderMillis > lastMillis);
    try {
      for (const migration of pending) {
        for (const statement of migration.sql) {
          if (statement.trim() !== '') await tx.execute(inSchema(statement, schema));
        }
        await tx.execute(
          sql`insert into ${sql.identifier(schema)}.__drizzle_migrations (hash, created_at)
              values (${migration.hash}, ${migration.folderMillis})`,
        );
      }
      await pinFunctions(tx, schema);
    } catch (err) {
      throw notTheMigrator(schema, pending.length, err);
    }
    return {
      applied: pending.length,
      total: migrations.length,
      ...(moved === undefined ? {} : { moved }),
    };
  });
}

/** Whether a one-column lookup (`to_regclass`, `to_regnamespace`) found its object. */
async function exists(tx: Executor, query: string): Promise<boolean> {
  const [row] = await tx.execute<Record<string, unknown>>(query);
  return row !== undefined && Object.values(row)[0] != null;
}

/**
 * A migration refused for want of a privilege (SQLSTATE 42501) says whose job migrating is: a
 * role without DDL — the runtime or reader role — can start on a current schema, never bring it
 * up to date. Anything else passes through unchanged.
 */
function notTheMigrator(schema: string, pending: number, err: unknown): unknown {
  const state = err instanceof OpstateError ? err.details.sqlState : sqlStateOf(err);
  if (state !== SqlState.INSUFFICIENT_PRIVILEGE) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `${pending} migration(s) of schema ${schema} are pending, and this role may not apply them (${message}); run \`opstate migrate\` as the role that owns the schema (the migrator, see docs/database-roles.md), then start this process again`,
    { cause: err, details: { schema, pending } },
  );
}

/**
 * Every statement of opstate names its tables unqualified: on a connection whose search_path is
 * not its schema (a pooler that dropped the startup parameter) they would be another schema's.
 */
async function refuseOtherSearchPath(tx: Executor, schema: string): Promise<void> {
  const [row] = await tx.execute<{ current: string | null }>('select current_schema() as current');
  if (row?.current === schema) return;
  throw new OpstateError(
    OpstateErrorCode.CONFIG,
    `the connection's schema is ${row?.current ?? 'none'}, not ${schema}: something between opstate and Postgres dropped its search_path (PgBouncer does in transaction mode); set search_path for opstate's role (ALTER ROLE … SET search_path = ${schema}) or use session pooling`,
  );
}

/**
 * drizzle-kit names the table a foreign key references with its schema, `"public"."operation"`:
 * in opstate's schema that is its own table, never an application's of the same name in public.
 */
function inSchema(statement: string, schema: string): string {
  return statement.replaceAll('"public"."', `"${schema}"."`);
}

/**
 * Pins the search_path of opstate's functions to its schema. A trigger runs in the session of
 * whoever writes the row, and an operator's psql or the application has its own search_path:
 * unpinned, `operation_tally` in a trigger's body could name another schema's table, or none.
 */
async function pinFunctions(tx: Executor, schema: string): Promise<void> {
  const unpinned = await tx.execute<{ signature: string }>(
    `select p.oid::regprocedure::text as signature from pg_proc p
      where p.pronamespace = '${schema}'::regnamespace and p.proconfig is null
        and p.proname not in (${UNPINNED_FUNCTIONS.map((n) => `'${n}'`).join(', ')})`,
  );
  for (const { signature } of unpinned) {
    await tx.execute(`alter function ${signature} set search_path = ${schema}`);
  }
}
