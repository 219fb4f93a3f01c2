import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type { Database } from './openDatabase.ts';

/** The committed, drizzle-kit generated SQL. The same folder runs on Postgres 15 and PGlite. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('./migrations', import.meta.url));

/**
 * Transaction-scoped advisory lock key that serialises migrators across processes. drizzle's own
 * migrator alone races: two processes both see "not applied" and the second fails.
 */
export const MIGRATION_LOCK_KEY = 0x6f70_7374_6d67; // 'opstmg'

export interface MigrateResult {
  /** Migrations applied by this call (0 when the schema was already current). */
  readonly applied: number;
  /** Migrations in the folder. */
  readonly total: number;
}

/**
 * Brings the schema up to date, in one transaction that first takes an advisory lock: running it
 * twice, or from several processes at once, applies each migration exactly once. Records what it
 * applied in `drizzle.__drizzle_migrations`, the table drizzle-kit uses, so `drizzle-kit migrate`
 * and this function agree. `folder` is the committed migrations unless told otherwise (an upgrade
 * test applies an older journal first).
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
  const migrations = readMigrationFiles({ migrationsFolder: folder });
  return database.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    await tx.execute(sql`create schema if not exists drizzle`);
    await tx.execute(
      sql`create table if not exists drizzle.__drizzle_migrations (
        id serial primary key, hash text not null, created_at bigint)`,
    );
    const [last] = await tx.execute<{ created_at: string | number | null }>(
      sql`select created_at from drizzle.__drizzle_migrations order by created_at desc limit 1`,
    );
    const lastMillis = last?.created_at == null ? -1 : Number(last.created_at);
    let applied = 0;
    for (const migration of migrations) {
      if (migration.folderMillis <= lastMillis) continue;
      for (const statement of migration.sql) {
        if (statement.trim() !== '') await tx.execute(statement);
      }
      await tx.execute(
        sql`insert into drizzle.__drizzle_migrations (hash, created_at)
            values (${migration.hash}, ${migration.folderMillis})`,
      );
      applied++;
    }
    return { applied, total: migrations.length };
  });
}
