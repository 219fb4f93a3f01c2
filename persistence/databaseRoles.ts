import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { SqlState } from './databaseError.ts';
import type { Database, Executor } from './openDatabase.ts';

/** A row privilege the runtime role holds on a table (never TRUNCATE, REFERENCES or TRIGGER). */
export type RowPrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';

const READ_APPEND: readonly RowPrivilege[] = ['SELECT', 'INSERT'];
const READ_WRITE: readonly RowPrivilege[] = ['SELECT', 'INSERT', 'UPDATE'];
const QUEUE: readonly RowPrivilege[] = ['SELECT', 'INSERT', 'DELETE'];
const ALL_ROWS: readonly RowPrivilege[] = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'];

/**
 * What the runtime role (workers, control planes, deleters, `opstate submit|retry|…`) may do to
 * each of opstate's tables: the row access its statements use and no more. History and records
 * (transitions, failures, journal steps, archive records, deletion members, outcomes and
 * receipts) are append-only: it inserts and reads them, never updates or deletes them, so what a
 * process wrote stays as written. Only the tally's delta rows, the deletion candidates
 * and cleared flow limits are ever deleted. One entry per table; a test fails when a migration
 * adds a table without one.
 */
export const RUNTIME_PRIVILEGES: Readonly<Record<string, readonly RowPrivilege[]>> = {
  __drizzle_migrations: ['SELECT'],
  archive_record: READ_APPEND,
  bundling_operation: READ_APPEND,
  circuit_breaker: READ_WRITE,
  control_plane_lease: READ_WRITE,
  copy_deletion: READ_WRITE,
  copy_deletion_member: READ_APPEND,
  copy_deletion_outcome: READ_APPEND,
  copy_deletion_receipt: READ_APPEND,
  data_location: READ_APPEND,
  data_transfer_package: READ_APPEND,
  data_transfer_package_physical_copy: READ_APPEND,
  deletion_candidate: QUEUE,
  deletion_policy: READ_WRITE,
  dispatch_relay_cursor: READ_WRITE,
  flow_limit: ALL_ROWS,
  history_retention: READ_WRITE,
  long_term_archive_operation: READ_APPEND,
  operation: READ_WRITE,
  operation_failure_event: READ_APPEND,
  operation_group: READ_WRITE,
  operation_input: READ_APPEND,
  operation_output: READ_APPEND,
  operation_replan: READ_APPEND,
  operation_step: READ_APPEND,
  operation_tally: QUEUE,
  operation_transition: READ_APPEND,
  package_files_complete: READ_WRITE,
  packaging_operation: READ_APPEND,
  physical_copy: READ_WRITE,
  physical_copy_transition: READ_APPEND,
  pipeline_cursor: READ_WRITE,
  pipeline_rollback: READ_APPEND,
  raw_data_file: READ_WRITE,
  raw_data_file_physical_copy: READ_APPEND,
  raw_data_package: READ_WRITE,
  raw_data_package_physical_copy: READ_APPEND,
  staging_operation: READ_APPEND,
  transfer_operation: READ_APPEND,
  unpack_operation: READ_APPEND,
};

/**
 * Functions that run as the schema's owner (SECURITY DEFINER): the runtime role calls them, the
 * reader may not. Their migration revokes them from PUBLIC.
 */
export const OWNER_FUNCTIONS = [
  'opstate_history_extend(integer)',
  'opstate_history_prune(timestamptz)',
  'opstate_journal_extend(integer)',
  'opstate_journal_prune(timestamptz)',
] as const;

/**
 * Tables a migration of this release drops, with what the release before granted on them: a
 * schema not yet migrated still has them, and a build of that release still running on it keeps
 * its access until the migration drops them.
 */
export const RETIRED_PRIVILEGES: Readonly<Record<string, readonly RowPrivilege[]>> = {
  dispatch_outbox: QUEUE,
};

/** The three roles of a deployment, named `<prefix>_migrator`, `_runtime` and `_reader`. */
export interface DatabaseRoles {
  /** Owns the schema and everything in it: the role `opstate migrate` connects as. */
  readonly migrator: string;
  /** Row access only, per `RUNTIME_PRIVILEGES`; no DDL, no TRUNCATE. */
  readonly runtime: string;
  /** SELECT on every table: the read-only dashboard, `opstate status|list|inspect`. */
  readonly reader: string;
}

/** What a role prefix may be. */
export const ROLE_PREFIX_ALLOWED =
  "a lowercase identifier: a-z, 0-9 and '_', not starting with a digit or pg_, at most 54 characters (default: the schema's name)";

/**
 * The roles named by `prefix` (default: the schema's name, so `opstate_runtime`). Roles belong to
 * the whole Postgres cluster, not to a database: two deployments in one cluster need two prefixes.
 * Refused with `BAD_INPUT` when the prefix is not a plain lowercase identifier.
 *
 * @example
 * ```ts
 * databaseRolesOf('opstate').runtime; // 'opstate_runtime'
 * ```
 */
export function databaseRolesOf(prefix: string): DatabaseRoles {
  if (!/^[a-z_][a-z0-9_]*$/.test(prefix) || prefix.length > 54 || prefix.startsWith('pg_')) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `role prefix ${JSON.stringify(prefix)} is not ${ROLE_PREFIX_ALLOWED}`,
    );
  }
  return {
    migrator: `${prefix}_migrator`,
    runtime: `${prefix}_runtime`,
    reader: `${prefix}_reader`,
  };
}

/**
 * The statements that set the runtime and reader roles' privileges on `schema` exactly: every
 * privilege they hold there is revoked first, then what `RUNTIME_PRIVILEGES` says (runtime) and
 * SELECT (reader) is granted, so running them again after an upgrade also takes back what a
 * release no longer needs. They must run as the schema's owner (the migrator), after migrating.
 *
 * @example
 * ```ts
 * for (const s of grantStatements('opstate', roles, Object.keys(RUNTIME_PRIVILEGES))) await tx.execute(s);
 * ```
 */
export function grantStatements(
  schema: string,
  roles: DatabaseRoles,
  tables: readonly string[],
): string[] {
  const both = `${roles.runtime}, ${roles.reader}`;
  const statements = [
    `REVOKE ALL ON ALL TABLES IN SCHEMA ${schema} FROM ${both}`,
    `REVOKE ALL ON ALL SEQUENCES IN SCHEMA ${schema} FROM ${both}`,
    `REVOKE ALL ON SCHEMA ${schema} FROM ${both}`,
    `GRANT USAGE ON SCHEMA ${schema} TO ${both}`,
    `GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ${schema} TO ${both}`,
    // The history's and the journal's partitions are made and dropped by the control plane (as
    // the schema's owner, through these); the reader only reads.
    // (A schema not yet migrated to them has neither.)
    ...OWNER_FUNCTIONS.map(
      (f) =>
        `DO $$ BEGIN IF to_regprocedure('${schema}.${f}') IS NOT NULL THEN REVOKE EXECUTE ON FUNCTION ${schema}.${f} FROM ${roles.reader}; END IF; END $$`,
    ),
    // The transition history's and the step journal's ids come from sequences (a partitioned
    // table has no identity; before migration 0024 the step journal's is its identity's own).
    `GRANT USAGE ON SEQUENCE ${schema}.operation_transition_id_seq TO ${roles.runtime}`,
    `GRANT USAGE ON SEQUENCE ${schema}.operation_step_id_seq TO ${roles.runtime}`,
  ];
  for (const table of [...tables].sort()) {
    const privileges = RUNTIME_PRIVILEGES[table] ?? RETIRED_PRIVILEGES[table];
    if (privileges === undefined) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `schema ${schema} has a table ${table} that this release grants nothing on: it is newer than this opstate, or not opstate's; grant with the opstate that migrated it`,
      );
    }
    statements.push(`GRANT ${privileges.join(', ')} ON ${schema}.${table} TO ${roles.runtime}`);
    statements.push(`GRANT SELECT ON ${schema}.${table} TO ${roles.reader}`);
  }
  return statements;
}

/**
 * The whole setup as a SQL script, for operators who manage roles themselves
 * (`opstate migrate --print-grants`): the three roles (which needs CREATEROLE) and the grants
 * (which need the schema's owner, after `opstate migrate`).
 *
 * @example
 * ```ts
 * process.stdout.write(rolesScript('opstate', databaseRolesOf('opstate')));
 * ```
 */
export function rolesScript(schema: string, roles: DatabaseRoles): string {
  const grants = grantStatements(schema, roles, Object.keys(RUNTIME_PRIVILEGES));
  return [
    `-- opstate's database roles for schema ${schema} (docs/database-roles.md).`,
    '-- 1. Once, as a role with CREATEROLE (roles belong to the whole cluster). Give each a',
    "--    password (ALTER ROLE … PASSWORD '…') and put it in that process's DATABASE_URL.",
    `CREATE ROLE ${roles.migrator} LOGIN;`,
    `DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO ${roles.migrator}', current_database()); END $$;`,
    `CREATE ROLE ${roles.runtime} LOGIN;`,
    `CREATE ROLE ${roles.reader} LOGIN;`,
    `-- 2. Then \`opstate migrate\` as ${roles.migrator}: it creates schema ${schema} and owns it.`,
    `-- 3. After every \`opstate migrate\`, as ${roles.migrator} (or a superuser), in one transaction:`,
    'BEGIN;',
    ...grants.map((s) => `${s};`),
    'COMMIT;',
    '',
  ].join('\n');
}

/** What `applyDatabaseRoles` did. */
export interface AppliedRoles {
  readonly roles: DatabaseRoles;
  /** The roles it had to create (empty when they existed). */
  readonly created: readonly string[];
  /** How many tables it granted on. */
  readonly tables: number;
}

/**
 * `opstate migrate --create-roles`: creates the runtime and reader roles that do not exist yet
 * (LOGIN, no password: that needs CREATEROLE) and sets their privileges on the schema exactly
 * (`grantStatements`: that needs the schema's owner), in one transaction. The role it runs as is
 * the migrator. Refuses with `CONFIG`, changing nothing, when it does not own the schema, when a
 * role to create cannot be created, or when an existing runtime or reader role is a superuser or
 * a member of the owner (it could then do anything the migrator can, and the split would be for
 * show). Run it again after each upgrade.
 *
 * @example
 * ```ts
 * await migrate(database);
 * const { created } = await applyDatabaseRoles(database, databaseRolesOf('opstate'));
 * ```
 */
export async function applyDatabaseRoles(
  database: Database,
  roles: DatabaseRoles,
): Promise<AppliedRoles> {
  const { schema } = database;
  if (database.dialect !== 'postgres') {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `the ${database.dialect} database has no roles: database roles need a Postgres server (DATABASE_URL)`,
    );
  }
  return database.transaction(async (tx) => {
    await requireOwner(tx, schema);
    const created: string[] = [];
    for (const role of [roles.runtime, roles.reader]) {
      if (await roleCreated(tx, schema, role)) created.push(role);
    }
    const tables = await tx.execute<{ name: string }>(
      // A partition is reached through its parent, whose grants are what count.
      `select c.relname as name from pg_class c
        where c.relnamespace = '${schema}'::regnamespace and c.relkind in ('r', 'p')
          and not c.relispartition`,
    );
    for (const statement of grantStatements(
      schema,
      roles,
      tables.map((t) => t.name),
    )) {
      await tx.execute(statement);
    }
    return { roles, created, tables: tables.length };
  });
}

/** Grants need the schema's owner: refuse, naming it, when this role is not (or not one of) it. */
async function requireOwner(tx: Executor, schema: string): Promise<void> {
  const [row] = await tx.execute<{ owner: string | null; me: string; owns: boolean | null }>(
    `select n.nspowner::regrole::text as owner, current_user as me,
            pg_has_role(current_user, n.nspowner, 'USAGE') as owns
       from (select 1) x left join pg_namespace n on n.nspname = '${schema}'`,
  );
  if (row?.owner == null) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `schema ${schema} does not exist: run \`opstate migrate\` first`,
    );
  }
  if (row.owns !== true) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `schema ${schema} belongs to ${row.owner}, not to ${row.me}: only its owner (the migrator) can grant on it; run this as ${row.owner}`,
    );
  }
}

/**
 * Creates `role` when it does not exist (true), or checks that the existing one holds no more than
 * the grants will give it: not a superuser, not a member of the schema's owner.
 */
async function roleCreated(tx: Executor, schema: string, role: string): Promise<boolean> {
  const [found] = await tx.execute<{ superuser: boolean; owner: boolean }>(
    `select r.rolsuper as superuser, pg_has_role(r.oid, n.nspowner, 'USAGE') as owner
       from pg_roles r, pg_namespace n where r.rolname = '${role}' and n.nspname = '${schema}'`,
  );
  if (found !== undefined) {
    if (found.superuser || found.owner) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `role ${role} ${found.superuser ? 'is a superuser' : `is, or is a member of, the owner of schema ${schema}`}: it could change the schema, so grants would not limit it; give the runtime and the reader roles of their own (--role-prefix)`,
      );
    }
    return false;
  }
  try {
    await tx.execute(`create role ${role} login`);
  } catch (err) {
    if (!(err instanceof OpstateError && err.details.sqlState === SqlState.INSUFFICIENT_PRIVILEGE))
      throw err;
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `role ${role} does not exist and this role may not create roles (it lacks CREATEROLE): have an administrator run the CREATE ROLE statements of \`opstate migrate --print-grants\`, then run \`opstate migrate --create-roles\` again to grant`,
      { cause: err },
    );
  }
  return true;
}
