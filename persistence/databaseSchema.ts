import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** The Postgres schema opstate keeps its tables, functions and migration record in by default. */
export const DEFAULT_DATABASE_SCHEMA = 'opstate';

/** What a schema name may be: lowercase, so that it reads the same quoted or not. */
export const DATABASE_SCHEMA_ALLOWED =
  "a lowercase identifier: a-z, 0-9 and '_', not starting with a digit or pg_, at most 63 characters (default opstate)";

/**
 * Names that cannot hold opstate's objects: `public` is where an application's tables are,
 * `drizzle` holds drizzle-kit's default migration record, the others are Postgres's own.
 */
const RESERVED = new Set(['public', 'drizzle', 'information_schema', 'pg_catalog', 'pg_toast']);

/**
 * Why `name` cannot be opstate's schema, or `undefined` when it can. The rule is strict on
 * purpose: the name goes into a connection's `search_path` and into DDL, so it must never need
 * quoting rules to read right.
 *
 * @example
 * ```ts
 * databaseSchemaProblem('opstate');   // undefined
 * databaseSchemaProblem('Ops-State'); // "has a character other than a-z, 0-9 and '_'…"
 * ```
 */
export function databaseSchemaProblem(name: string): string | undefined {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) {
    return "has a character other than a-z, 0-9 and '_', or starts with a digit";
  }
  if (name.length > 63) return 'is longer than 63 characters';
  if (name.startsWith('pg_')) return 'starts with pg_, which Postgres keeps for itself';
  if (RESERVED.has(name)) {
    return name === 'public'
      ? "is where an application's own tables are; opstate's need a schema of their own"
      : 'is taken by Postgres or drizzle';
  }
  return undefined;
}

/**
 * The schema to use: `given`, else `OPSTATE_DB_SCHEMA`, else `opstate`; refused with `CONFIG`
 * (naming the setting and the fix) when it is not a safe name.
 *
 * @example
 * ```ts
 * databaseSchemaOf(undefined, {});                              // 'opstate'
 * databaseSchemaOf(undefined, { OPSTATE_DB_SCHEMA: 'ingest' }); // 'ingest'
 * ```
 */
export function databaseSchemaOf(
  given: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): string {
  const fromEnv = env.OPSTATE_DB_SCHEMA === '' ? undefined : env.OPSTATE_DB_SCHEMA;
  const name = given ?? fromEnv ?? DEFAULT_DATABASE_SCHEMA;
  const problem = databaseSchemaProblem(name);
  if (problem !== undefined) {
    const setting = given === undefined ? 'OPSTATE_DB_SCHEMA' : 'the option schema';
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `${setting} must be ${DATABASE_SCHEMA_ALLOWED}; got '${name}', which ${problem}`,
    );
  }
  return name;
}
