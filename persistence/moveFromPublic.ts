import type { MigrationMeta } from 'drizzle-orm/migrator';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Executor } from './openDatabase.ts';
import type { MovedFromPublic } from './publicRecords.ts';

export type { MovedFromPublic } from './publicRecords.ts';

/** Where opstate kept everything before it had a schema of its own. */
export const LEGACY_SCHEMA = 'public';
/** drizzle-kit's default record, where opstate recorded its migrations beside an application's. */
export const LEGACY_RECORD = 'drizzle.__drizzle_migrations';

/** The tables and functions one migration creates, read from its SQL. */
export interface MigrationObjects {
  readonly tables: readonly string[];
  readonly functions: readonly string[];
  /** The tables it drops (`DROP TABLE`): a later migration may drop what an earlier one made. */
  readonly dropped: readonly string[];
}

/**
 * The tables and functions a migration creates (its `CREATE TABLE` and `CREATE [OR REPLACE]
 * FUNCTION` statements; comments left out). Indexes, constraints, triggers and the sequences of
 * identity columns belong to their table and move with it.
 *
 * @example
 * ```ts
 * migrationObjects(migration).tables; // ['bundling_operation', 'data_location', …]
 * ```
 */
export function migrationObjects(migration: Pick<MigrationMeta, 'sql'>): MigrationObjects {
  const text = migration.sql.join('\n').replace(/--[^\n]*/g, '');
  const names = (pattern: RegExp) => [...text.matchAll(pattern)].map((m) => m[1] as string);
  return {
    tables: names(/\bcreate\s+table\s+(?:if\s+not\s+exists\s+)?"?([a-z_][a-z0-9_]*)"?/gi),
    functions: names(/\bcreate\s+(?:or\s+replace\s+)?function\s+"?([a-z_][a-z0-9_]*)"?\s*\(/gi),
    dropped: names(/\bdrop\s+table\s+(?:if\s+exists\s+)?"?([a-z_][a-z0-9_]*)"?/gi),
  };
}

const list = (names: readonly string[]) => names.map((n) => `'${n}'`).join(', ');

/**
 * Upgrades a deployment migrated before opstate had a schema of its own: its tables and functions
 * in `public`, its migrations recorded in `drizzle.__drizzle_migrations`. Its rows there are known
 * by their timestamps (each migration's, from the journal); the objects those migrations created
 * move into `schema` (`ALTER … SET SCHEMA`: rows, indexes, constraints, triggers and identity
 * sequences go with their table, and column defaults and triggers name functions by oid, so they
 * follow), and the rows move into the schema's own record. An application's tables and its rows of the drizzle record are never touched; the
 * drizzle record is dropped only when opstate's rows were all it held.
 *
 * Runs inside the migrator's transaction, under its lock: all of it or nothing, once. Returns
 * `undefined` when there is nothing to move (a new database, or one already moved). Refuses with
 * `CONFIG` when the picture is ambiguous: opstate's tables or record in both places, or a record
 * whose tables are gone.
 *
 * @example
 * ```ts
 * const moved = await moveFromPublic(tx, 'opstate', readMigrationFiles({ migrationsFolder }));
 * if (moved !== undefined) log(describeMove(moved));
 * ```
 */
export async function moveFromPublic(
  tx: Executor,
  schema: string,
  migrations: readonly MigrationMeta[],
): Promise<MovedFromPublic | undefined> {
  const [legacy] = await tx.execute<{ present: boolean }>(
    `select to_regclass('${LEGACY_RECORD}') is not null as present`,
  );
  if (legacy?.present !== true) return undefined;
  const ours = migrations.map((m) => m.folderMillis).join(', ');
  const recorded = await tx.execute<{ created_at: string | number }>(
    `select created_at from ${LEGACY_RECORD} where created_at in (${ours})`,
  );
  if (recorded.length === 0) return undefined;
  const applied = new Set(recorded.map((r) => Number(r.created_at)));
  const objects = migrations.filter((m) => applied.has(m.folderMillis)).map(migrationObjects);
  const dropped = new Set(objects.flatMap((o) => o.dropped));
  const tables = [...new Set(objects.flatMap((o) => o.tables))].filter((t) => !dropped.has(t));
  const functions = [...new Set(objects.flatMap((o) => o.functions))];

  const where = await tx.execute<{ relname: string; schema: string }>(
    `select c.relname, n.nspname as schema from pg_class c
       join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p') and n.nspname in ('${LEGACY_SCHEMA}', '${schema}')
        and c.relname in (${list([...tables, '__drizzle_migrations'])})`,
  );
  const inSchema = where.filter((r) => r.schema === schema).map((r) => r.relname);
  if (inSchema.length > 0) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `opstate's tables are in two places: ${LEGACY_RECORD} records ${recorded.length} of its migrations in ${LEGACY_SCHEMA}, and schema "${schema}" already holds ${inSchema.sort().join(', ')}; keep the one that holds your data (drop the other schema's opstate tables, or delete opstate's rows from ${LEGACY_RECORD}), then migrate again`,
    );
  }
  const inPublic = new Set(where.map((r) => r.relname));
  const missing = tables.filter((t) => !inPublic.has(t));
  if (missing.length > 0) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `${LEGACY_RECORD} records ${recorded.length} of opstate's migrations, but ${LEGACY_SCHEMA} lacks their tables ${missing.sort().join(', ')}; restore them, or delete opstate's rows from ${LEGACY_RECORD} to start afresh, then migrate again`,
    );
  }

  await tx.execute(`create schema if not exists ${schema}`);
  for (const table of tables) {
    await tx.execute(`alter table ${LEGACY_SCHEMA}.${table} set schema ${schema}`);
  }
  // A partitioned table moves without its partitions (the transition history's, made by a function
  // rather than by a migration's CREATE TABLE): each follows its parent. (Partitions of indexes are
  // in pg_inherits too; they move with their tables.)
  const partitions = await tx.execute<{ name: string }>(
    `select c.relname as name from pg_inherits i
       join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
      where p.relnamespace = '${schema}'::regnamespace and c.relkind in ('r', 'p')
        and c.relnamespace = '${LEGACY_SCHEMA}'::regnamespace`,
  );
  for (const { name } of partitions) {
    await tx.execute(`alter table ${LEGACY_SCHEMA}.${name} set schema ${schema}`);
  }
  const procedures = await tx.execute<{ signature: string }>(
    `select p.oid::regprocedure::text as signature from pg_proc p
      where p.pronamespace = '${LEGACY_SCHEMA}'::regnamespace
        and p.proname in (${list(functions.length === 0 ? [''] : functions)})`,
  );
  for (const { signature } of procedures) {
    await tx.execute(`alter function ${qualified(signature)} set schema ${schema}`);
  }
  await createRecord(tx, schema);
  await tx.execute(
    `insert into ${schema}.__drizzle_migrations (hash, created_at)
       select hash, created_at from ${LEGACY_RECORD} where created_at in (${ours}) order by id`,
  );
  await tx.execute(`delete from ${LEGACY_RECORD} where created_at in (${ours})`);
  await dropEmptyLegacyRecord(tx);
  return {
    to: schema,
    tables: tables.length + partitions.length,
    functions: procedures.length,
    migrations: recorded.length,
  };
}

/**
 * A function's signature as `regprocedure` prints it: qualified unless `public` is on the
 * connection's search_path, which opstate's connections never have.
 */
function qualified(signature: string): string {
  return signature.startsWith(`${LEGACY_SCHEMA}.`) ? signature : `${LEGACY_SCHEMA}.${signature}`;
}

/** The schema's migration record, in drizzle-kit's shape. */
export async function createRecord(tx: Executor, schema: string): Promise<void> {
  await tx.execute(
    `create table if not exists ${schema}.__drizzle_migrations (
       id serial primary key, hash text not null, created_at bigint)`,
  );
}

/** The drizzle record and its schema go when opstate's rows were all they held. */
async function dropEmptyLegacyRecord(tx: Executor): Promise<void> {
  const [left] = await tx.execute<{ rows: number }>(
    `select count(*)::int as rows from ${LEGACY_RECORD}`,
  );
  if (left?.rows !== 0) return;
  await tx.execute(`drop table ${LEGACY_RECORD}`);
  const [others] = await tx.execute<{ n: number }>(
    `select (select count(*) from pg_class where relnamespace = n.oid)
          + (select count(*) from pg_proc where pronamespace = n.oid)
          + (select count(*) from pg_type where typnamespace = n.oid) as n
       from pg_namespace n where n.nspname = 'drizzle'`,
  );
  if (others !== undefined && Number(others.n) === 0) await tx.execute('drop schema drizzle');
}

/**
 * The log line of a move.
 *
 * @example
 * ```ts
 * describeMove({ to: 'opstate', tables: 34, functions: 14, migrations: 11 });
 * ```
 */
export function describeMove(moved: MovedFromPublic): string {
  return `moved opstate's ${moved.tables} tables and ${moved.functions} functions from schema ${LEGACY_SCHEMA} into schema "${moved.to}", and its record of ${moved.migrations} migrations from ${LEGACY_RECORD} to ${moved.to}.__drizzle_migrations; the application's own tables and drizzle record are untouched`;
}
