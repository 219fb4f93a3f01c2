import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInspectCommand } from '../../cli/commands/inspect.ts';
import { createListCommand } from '../../cli/commands/list.ts';
import { createMigrateCommand } from '../../cli/commands/migrate.ts';
import { createStatusCommand } from '../../cli/commands/status.ts';
import { startDashboard } from '../../dashboard/startDashboard.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import {
  applyDatabaseRoles,
  type DatabaseRoles,
  databaseRolesOf,
  RUNTIME_PRIVILEGES,
} from '../../persistence/databaseRoles.ts';
import { MIGRATIONS_FOLDER, migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createRuntime, resolveRuntimeTiming } from '../../runtime/Runtime.ts';
import {
  createTestDatabase,
  dropTestDatabase,
  findAdminUrl,
  type TestDatabase,
} from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { artifactSuite } from './artifactSuite.ts';
import { contractSuite } from './contractSuite.ts';
import { copySuite } from './copySuite.ts';
import { inputFor, MIGRATIONS, makeWorld } from './fixtures.ts';
import { retentionSuite } from './retentionSuite.ts';
import { storeSuite } from './storeSuite.ts';

/**
 * opstate's three database roles on the real Postgres. Roles belong to the whole cluster, so every
 * run names its own (`opstate_t<random>_…`) and drops them afterwards; the database is the run's.
 * The migrator here is an ordinary login role with CREATEROLE and CREATE on the database, not a
 * superuser: what the operator of a managed Postgres can have.
 */
const prefix = `opstate_t${randomBytes(5).toString('hex')}`;
const roles = databaseRolesOf(prefix);
const printedPrefix = `${prefix}p`;
const created: string[] = [];

let admin: postgres.Sql;
let testDb: TestDatabase;
let migrator: Database;
let runtime: Database;
let reader: Database;

const as = (role: string, url = testDb.url) => {
  const u = new URL(url);
  u.username = role;
  u.password = '';
  return u.toString();
};

async function createRole(statement: string, name: string): Promise<void> {
  await admin.unsafe(statement);
  created.push(name);
}

/** The SQLSTATE of a refused statement (the persistence edge keeps it in the error's details). */
async function refusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (err) {
    expect(err).toBeInstanceOf(OpstateError);
    return String((err as OpstateError).details.sqlState);
  }
  throw new Error('the statement was not refused');
}

beforeAll(async () => {
  admin = postgres(await findAdminUrl(), { max: 1, onnotice: () => {} });
  testDb = await createTestDatabase();
  await createRole(`create role ${roles.migrator} login createrole`, roles.migrator);
  await admin.unsafe(`grant create on database ${testDb.name} to ${roles.migrator}`);
  migrator = await openDatabase({ databaseUrl: as(roles.migrator), max: 2 });
  await migrate(migrator);
  const applied = await applyDatabaseRoles(migrator, roles);
  created.push(...applied.created);
  expect(applied.created).toEqual([roles.runtime, roles.reader]);
  runtime = await openDatabase({ databaseUrl: as(roles.runtime), max: 4 });
  reader = await openDatabase({ databaseUrl: as(roles.reader), max: 2 });
});

afterAll(async () => {
  await Promise.all([migrator?.close(), runtime?.close(), reader?.close()]);
  await dropTestDatabase(testDb);
  for (const role of created.reverse()) await admin?.unsafe(`drop role if exists ${role}`);
  await admin?.end({ timeout: 5 });
});

describe('the runtime role runs the persistence suites', () => {
  const backend = {
    database: () => runtime,
    peer: () => openDatabase({ databaseUrl: as(roles.runtime), max: 4 }),
    owner: () => migrator,
  };
  storeSuite(backend);
  retentionSuite(backend);
  copySuite(backend);
  contractSuite(backend);
  artifactSuite(backend);
});

describe('database roles', () => {
  it('declares privileges for exactly the tables the migrations create', async () => {
    // The history's partitions are reached through their parent, whose grants count.
    const tables = await migrator.execute<{ name: string }>(
      `select c.relname as name from pg_class c
        where c.relnamespace = 'opstate'::regnamespace and c.relkind in ('r', 'p')
          and not c.relispartition order by 1`,
    );
    expect(tables.map((t) => t.name)).toEqual(Object.keys(RUNTIME_PRIVILEGES).sort());
  });

  it('the runtime role starts a runtime (migrating a current schema is a read) and completes work through a worker', async () => {
    expect(await migrate(runtime)).toEqual({ applied: 0, total: MIGRATIONS });
    const rt = await createRuntime({ databaseUrl: as(roles.runtime), logger: memoryLogger() });
    try {
      rt.startWorker({
        kinds: [OperationKind.TRANSFER],
        handlers: {
          [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await ctx.requiredOutputs() }),
        },
      });
      rt.startControlPlane();
      const world = await makeWorld(rt.database);
      const id = await rt.submit(inputFor(OperationKind.TRANSFER, world));
      await waitFor(
        async () => (await rt.store.load(id)).status === 'COMPLETED',
        'the transfer submitted as the runtime role completes',
      );
      expect((await rt.get(id)).transitions.map((t) => t.event)).toEqual([
        'CREATE',
        'SCHEDULE',
        'START',
        'COMPLETE',
      ]);
    } finally {
      await rt.close();
    }
  });

  it('refuses the runtime role any DDL and TRUNCATE, with the privilege named', async () => {
    const ddl = [
      'create table opstate.intruder (id int)',
      'alter table operation add column intruder int',
      'alter table archive_record disable trigger archive_record_append_only',
      'drop trigger archive_record_append_only on archive_record',
      'create index intruder_idx on operation (kind)',
      'drop table operation_transition',
      'truncate dispatch_relay_cursor',
      'create or replace function opstate_refuse_update() returns trigger language plpgsql as $$ begin return new; end $$',
    ];
    for (const statement of ddl) {
      expect(await refusal(() => runtime.execute(statement)), statement).toBe('42501');
    }
    const err = await runtime.execute('drop table operation').catch((e: unknown) => e);
    expect((err as OpstateError).code).toBe('CONFIG');
    expect((err as OpstateError).message).toMatch(/lacks a privilege .*docs\/database-roles\.md/);
  });

  it('refuses the runtime role UPDATE and DELETE on the append-only history and records', async () => {
    const world = await makeWorld(runtime);
    await new OperationStore(runtime).create(inputFor(OperationKind.TRANSFER, world));
    const history = Object.entries(RUNTIME_PRIVILEGES)
      .filter(([, p]) => p.includes('INSERT') && !p.includes('UPDATE') && !p.includes('DELETE'))
      .map(([t]) => t);
    expect(history).toEqual(
      expect.arrayContaining([
        'operation_transition',
        'operation_failure_event',
        'operation_step',
        'archive_record',
        'physical_copy_transition',
        'copy_deletion_outcome',
        'copy_deletion_receipt',
        'pipeline_rollback',
      ]),
    );
    const columns = await migrator.execute<{ table: string; column: string }>(
      `select table_name as table, min(column_name) as column from information_schema.columns
        where table_schema = 'opstate' group by 1`,
    );
    const columnOf = new Map(columns.map((c) => [c.table, c.column]));
    for (const table of history) {
      // A statement on every row: refused before a row is looked at, whatever the table holds.
      const column = columnOf.get(table);
      expect(
        await refusal(() => runtime.execute(`update ${table} set ${column} = ${column}`)),
        `update ${table}`,
      ).toBe('42501');
      expect(await refusal(() => runtime.execute(`delete from ${table}`)), `delete ${table}`).toBe(
        '42501',
      );
    }
    const [kept] = await migrator.execute<{ n: number }>(
      'select count(*)::int as n from operation_transition',
    );
    expect(kept?.n).toBeGreaterThan(0);
  });

  it('the reader role serves every page of a read-only dashboard and can write nothing', async () => {
    const world = await makeWorld(runtime);
    const id = await new OperationStore(runtime).create(inputFor(OperationKind.TRANSFER, world));
    const dashboard = await startDashboard({
      database: reader,
      timing: resolveRuntimeTiming({}),
      heartbeats: null,
      command: null,
      port: 0,
      logger: memoryLogger(),
    });
    try {
      const pages = [
        '/',
        '/api/overview',
        '/operations',
        `/operations/${id}`,
        `/api/operations/${id}`,
        '/workers',
        '/api/workers',
        '/copies',
        '/attention?category=failed',
      ];
      for (const page of pages) {
        const res = await fetch(`${dashboard.url}${page}`);
        expect(res.status, `${page}: ${await res.clone().text()}`).toBe(200);
      }
    } finally {
      await dashboard.close();
    }
    for (const statement of [
      `insert into data_location (site, name, location_type, storage_root) values ('s', 'n', 'buffer', '/x')`,
      `update operation set priority = 0`,
      `update dispatch_relay_cursor set after_id = 0`,
      `select * from operation for update`,
      'create table opstate.intruder (id int)',
      // The history's partitions are made and dropped as the schema's owner: not by the reader.
      'select opstate_history_extend(2)',
      'select * from opstate_history_prune()',
      'select opstate_journal_extend(2)',
      'select * from opstate_journal_prune()',
      `update history_retention set keep = interval '1 day'`,
    ]) {
      expect(await refusal(() => reader.execute(statement)), statement).toBe('42501');
    }
    // The runtime role, whose leader calls them, may; it may still create no table itself.
    await runtime.execute('select opstate_history_extend(2)');
    await runtime.execute('select * from opstate_history_prune()');
    await runtime.execute('select opstate_journal_extend(2)');
    await runtime.execute('select * from opstate_journal_prune()');
    expect(
      await refusal(() => runtime.execute('create table opstate.operation_transition_p9 (id int)')),
    ).toBe('42501');
  });

  it('the reader role runs `opstate status`, `list` and `inspect`, as text and as JSON', async () => {
    const world = await makeWorld(runtime);
    const store = new OperationStore(runtime);
    const id = await store.create(inputFor(OperationKind.TRANSFER, world));
    // Each command closes the database it opened: every run gets its own, as the reader.
    const asReader = () => openDatabase({ databaseUrl: as(roles.reader), max: 1 });
    const noHeartbeats = async () => ({
      timing: resolveRuntimeTiming({}),
      heartbeats: null,
      close: async () => {},
    });
    const run = async (command: ReturnType<typeof createListCommand>, args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await command.run(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
      expect(code, `${command.name} ${args.join(' ')}: ${err.join('\n')}`).toBe(0);
      return out.join('\n');
    };
    const status = createStatusCommand(asReader, noHeartbeats);
    const counts = JSON.parse(await run(status, ['--json'])) as {
      operations: Record<string, Record<string, number>>;
    };
    expect(counts.operations.transfer?.PENDING).toBeGreaterThan(0);
    expect(await run(status, [])).toMatch(/^transfer\s/m);
    const list = createListCommand(asReader);
    const listed = JSON.parse(await run(list, ['--kind', 'transfer', '--json'])) as {
      id: string;
    }[];
    expect(listed.map((o) => o.id)).toContain(id);
    expect(await run(list, ['--status', 'PENDING'])).toContain(id);
    const inspect = createInspectCommand(asReader);
    expect(JSON.parse(await run(inspect, [id, '--json']))).toMatchObject({ id, status: 'PENDING' });
    expect(await run(inspect, [id])).toContain(id);
  });

  it('`opstate migrate --create-roles` as the migrator grants again, creating nothing once the roles exist', async () => {
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    const command = createMigrateCommand(() =>
      openDatabase({ databaseUrl: as(roles.migrator), max: 1 }),
    );
    expect(await command.run(['--create-roles', '--role-prefix', prefix, '--json'], io)).toBe(0);
    expect(JSON.parse(out.at(-1) as string)).toMatchObject({
      applied: 0,
      schema: 'opstate',
      roles: { ...roles, created: [] },
    });
    const [check] = await migrator.execute<{ update: boolean }>(
      `select has_table_privilege('${roles.runtime}', 'opstate.operation_transition', 'UPDATE') as update`,
    );
    expect(check?.update).toBe(false);
  });

  it('a runtime role meeting a pending migration is refused with CONFIG, naming the migrator', async () => {
    const db = await createTestDatabase();
    const older = await mkdtemp(join(tmpdir(), 'opstate-roles-'));
    const owner = await openDatabase({ databaseUrl: as(roles.migrator, db.url), max: 1 });
    await admin.unsafe(`grant create on database ${db.name} to ${roles.migrator}`);
    try {
      // The committed journal without its last migration: the runtime's build is one newer.
      await cp(MIGRATIONS_FOLDER, older, { recursive: true });
      const journalPath = join(older, 'meta', '_journal.json');
      const journal = JSON.parse(await readFile(journalPath, 'utf8')) as { entries: unknown[] };
      journal.entries.pop();
      await writeFile(journalPath, JSON.stringify(journal));
      await migrate(owner, older);
      await applyDatabaseRoles(owner, roles);
      const behind = await openDatabase({ databaseUrl: as(roles.runtime, db.url), max: 1 });
      try {
        const err = await migrate(behind).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(OpstateError);
        expect((err as OpstateError).code).toBe('CONFIG');
        expect((err as OpstateError).message).toContain(
          '1 migration(s) of schema opstate are pending, and this role may not apply them',
        );
      } finally {
        await behind.close();
      }
      const [record] = await owner.execute<{ n: number }>(
        'select count(*)::int as n from __drizzle_migrations',
      );
      expect(record?.n).toBe(MIGRATIONS - 1);
    } finally {
      await owner.close();
      await dropTestDatabase(db);
      await rm(older, { recursive: true, force: true });
    }
  });

  it('--create-roles refuses, changing nothing, when it is not run by the schema owner or a role is a superuser', async () => {
    const notOwner = await migrate(runtime)
      .then(() => applyDatabaseRoles(runtime, roles))
      .catch((e: unknown) => e);
    expect((notOwner as OpstateError).code).toBe('CONFIG');
    expect((notOwner as OpstateError).message).toContain(
      `schema opstate belongs to ${roles.migrator}, not to ${roles.runtime}`,
    );
    const superuser: DatabaseRoles = {
      ...roles,
      reader: (await admin`select current_user`)[0]?.current_user,
    };
    const err = await applyDatabaseRoles(migrator, superuser).catch((e: unknown) => e);
    expect((err as OpstateError).code).toBe('CONFIG');
    expect((err as OpstateError).message).toMatch(/is a superuser/);
    expect(() => databaseRolesOf('Bad-Prefix')).toThrow(/role prefix "Bad-Prefix" is not/);
  });

  it('`opstate migrate --print-grants` prints SQL that, run as an administrator and the migrator, sets up the same roles', async () => {
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
    const command = createMigrateCommand(() => {
      throw new Error('--print-grants connects to nothing');
    });
    expect(await command.run(['--print-grants', '--role-prefix', printedPrefix], io)).toBe(0);
    const script = out.join('\n');
    const printed = databaseRolesOf(printedPrefix);
    const [beforeMigrating, afterMigrating] = script.split(/^-- 2\. .*$/m) as [string, string];
    const db = await createTestDatabase();
    created.push(printed.migrator, printed.runtime, printed.reader);
    const adminOfDb = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      await adminOfDb.unsafe(beforeMigrating).simple();
      const owner = await openDatabase({ databaseUrl: as(printed.migrator, db.url), max: 1 });
      try {
        await migrate(owner);
        const ownerSql = postgres(as(printed.migrator, db.url), { max: 1, onnotice: () => {} });
        await ownerSql
          .unsafe(afterMigrating)
          .simple()
          .finally(() => ownerSql.end({ timeout: 5 }));
        const [check] = await owner.execute<Record<string, boolean>>(
          `select has_table_privilege('${printed.runtime}', 'opstate.operation', 'UPDATE') as op_update,
                  has_table_privilege('${printed.runtime}', 'opstate.operation_transition', 'INSERT') as tr_insert,
                  has_table_privilege('${printed.runtime}', 'opstate.operation_transition', 'UPDATE') as tr_update,
                  has_table_privilege('${printed.runtime}', 'opstate.archive_record', 'DELETE') as ar_delete,
                  has_table_privilege('${printed.runtime}', 'opstate.operation', 'TRUNCATE') as op_truncate,
                  has_table_privilege('${printed.reader}', 'opstate.operation', 'SELECT') as rd_select,
                  has_table_privilege('${printed.reader}', 'opstate.operation', 'INSERT') as rd_insert,
                  has_schema_privilege('${printed.runtime}', 'opstate', 'CREATE') as rt_create`,
        );
        expect(check).toEqual({
          op_update: true,
          tr_insert: true,
          tr_update: false,
          ar_delete: false,
          op_truncate: false,
          rd_select: true,
          rd_insert: false,
          rt_create: false,
        });
      } finally {
        await owner.close();
      }
    } finally {
      await adminOfDb.end({ timeout: 5 });
      await dropTestDatabase(db);
    }
  });
});
