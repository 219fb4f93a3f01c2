import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import type { Io } from '../../cli/Command.ts';
import { createMigrateCommand } from '../../cli/commands/migrate.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { migrateIntoPublic, openLegacyDatabase } from './fixtures/legacyLayout.ts';
import { inputFor, MIGRATIONS, makeWorld } from './fixtures.ts';

// Each case is a database layout of its own: a fresh database per case.
const databases: TestDatabase[] = [];
async function freshDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase('opstate_schema');
  databases.push(db);
  return db;
}
afterAll(async () => {
  for (const db of databases) await dropTestDatabase(db);
});

/** What the application keeps in the database: its drizzle record and its own `operation` table. */
async function addApplication(url: string, table = 'operation'): Promise<void> {
  const app = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await app.unsafe(`create schema if not exists drizzle;
      create table if not exists drizzle.__drizzle_migrations (
        id serial primary key, hash text not null, created_at bigint);
      insert into drizzle.__drizzle_migrations (hash, created_at)
        values ('app-0000', 1900000000000), ('app-0001', 1900000000001);
      create table public.${table} (id uuid primary key, title text not null);
      insert into public.${table} values ('00000000-0000-4000-8000-00000000a991', 'the app''s row');`);
  } finally {
    await app.end({ timeout: 5 });
  }
}

/** The application's record and rows as it sees them (its connection, its search_path). */
async function applicationState(url: string, table = 'operation') {
  const app = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return {
      record: [
        ...(await app.unsafe(
          'select hash, created_at::text from drizzle.__drizzle_migrations order by id',
        )),
      ],
      rows: [...(await app.unsafe(`select id, title from public.${table}`))],
      publicTables: (
        await app.unsafe(
          `select relname from pg_class where relnamespace = 'public'::regnamespace and relkind = 'r' order by 1`,
        )
      ).map((r) => r.relname as string),
    };
  } finally {
    await app.end({ timeout: 5 });
  }
}

const APP_STATE = {
  record: [
    { hash: 'app-0000', created_at: '1900000000000' },
    { hash: 'app-0001', created_at: '1900000000001' },
  ],
  rows: [{ id: '00000000-0000-4000-8000-00000000a991', title: "the app's row" }],
};

async function countIn(database: Database, schema: string, what: 'tables' | 'functions') {
  const [row] = await database.execute<{ n: number }>(
    what === 'tables'
      ? `select count(*)::int as n from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = '${schema}' and c.relkind in ('r', 'p') and not c.relispartition`
      : `select count(*)::int as n from pg_proc p join pg_namespace n on n.oid = p.pronamespace
          where n.nspname = '${schema}' and p.proname like 'opstate\\_%'`,
  );
  return row?.n;
}

/** A worker and a control plane complete one transfer on the runtime. */
async function completesOne(runtime: Runtime): Promise<void> {
  runtime.startWorker({
    kinds: [OperationKind.TRANSFER],
    handlers: {
      [OperationKind.TRANSFER]: async (ctx) => ({ outputs: await ctx.requiredOutputs() }),
    },
  });
  runtime.startControlPlane();
  const w = await makeWorld(runtime.database);
  const id = await runtime.submit(inputFor(OperationKind.TRANSFER, w));
  await waitFor(
    async () => (await runtime.store.load(id)).status === 'COMPLETED',
    'the transfer completes',
  );
}

function capture(): { io: Io; out: string[] } {
  const out: string[] = [];
  return { out, io: { out: (line) => out.push(line), err: (line) => out.push(line) } };
}

describe("opstate's own schema", () => {
  it("migrates beside an application's drizzle migrations and its own `operation` table, touching neither", async () => {
    const db = await freshDatabase();
    await addApplication(db.url);
    const first = capture();
    const command = createMigrateCommand(() => openDatabase({ databaseUrl: db.url, max: 2 }));
    expect(await command.run([], first.io)).toBe(0);
    expect(first.out).toEqual([`applied ${MIGRATIONS} of ${MIGRATIONS} migrations (postgres)`]);

    const runtime = await createRuntime({ databaseUrl: db.url, logger: memoryLogger() });
    try {
      const { database } = runtime;
      expect(await countIn(database, 'opstate', 'tables')).toBe(40); // 39 and the record
      const [record] = await database.execute<{ n: number }>(
        'select count(*)::int as n from opstate.__drizzle_migrations',
      );
      expect(record?.n).toBe(MIGRATIONS);
      // drizzle-kit's SQL names "public"."operation" in its foreign keys: none may point there.
      const foreign = await database.execute<{ target: string; n: number }>(
        `select confrelid::regclass::text as target, count(*)::int as n from pg_constraint
          where contype = 'f' and connamespace = 'opstate'::regnamespace
            and confrelid::regclass::text in ('operation', 'public.operation')
          group by 1`,
      );
      expect(foreign).toEqual([{ target: 'operation', n: expect.any(Number) }]);
      await completesOne(runtime);
    } finally {
      await runtime.close();
    }
    expect(await applicationState(db.url)).toEqual({ ...APP_STATE, publicTables: ['operation'] });
  });

  it('moves a deployment migrated before the schema out of public, rows intact, the record with it', async () => {
    const db = await freshDatabase();
    const legacy = openLegacyDatabase(db.url);
    const ids: string[] = [];
    try {
      expect(await migrateIntoPublic(legacy)).toBe(MIGRATIONS);
      const store = new OperationStore(legacy);
      const w = await makeWorld(legacy);
      ids.push(await store.create(inputFor(OperationKind.TRANSFER, w)));
      ids.push(await store.create(inputFor(OperationKind.UNPACK, w)));
      await store.apply(
        ids[1] as string,
        { type: 'CANCEL', reason: 'not needed' },
        { by: 'operator' },
      );
    } finally {
      await legacy.close();
    }
    // The application migrated with drizzle after opstate had, into the same record.
    await addApplication(db.url, 'app_order');

    const logger = memoryLogger();
    const runtime = await createRuntime({ databaseUrl: db.url, logger });
    try {
      const moved = logger.lines.find((l) => l.message.startsWith('moved opstate'));
      expect(moved?.message).toContain(
        `moved opstate's 51 tables and 31 functions from schema public into schema "opstate", and its record of ${MIGRATIONS} migrations from drizzle.__drizzle_migrations to opstate.__drizzle_migrations`,
      );
      const { database } = runtime;
      expect(await countIn(database, 'opstate', 'tables')).toBe(40);
      expect(await countIn(database, 'public', 'functions')).toBe(0);
      const [record] = await database.execute<{ n: number }>(
        'select count(*)::int as n from opstate.__drizzle_migrations',
      );
      expect(record?.n).toBe(MIGRATIONS);
      expect((await runtime.store.load(ids[0] as string)).status).toBe('PENDING');
      const cancelled = await runtime.get(ids[1] as string);
      expect(cancelled.status).toBe('FAILED');
      expect(cancelled.transitions.map((t) => t.event)).toEqual(['CREATE', 'CANCEL']);
      // The moved triggers kept counting: the tally agrees with the rows.
      expect(await database.execute('select * from opstate_recount_operation_tally()')).toEqual([]);
      await completesOne(runtime);
      await waitFor(
        async () => (await runtime.store.load(ids[0] as string)).status === 'COMPLETED',
        'the transfer stored before the move completes',
      );
      expect(await migrate(database)).toEqual({ applied: 0, total: MIGRATIONS });
    } finally {
      await runtime.close();
    }
    expect(await applicationState(db.url, 'app_order')).toEqual({
      ...APP_STATE,
      publicTables: ['app_order'],
    });
  });

  it('runs in a schema named by the option or OPSTATE_DB_SCHEMA, and refuses an unsafe name', async () => {
    const db = await freshDatabase();
    const runtime = await createRuntime({
      databaseUrl: db.url,
      databaseSchema: 'ingest_ops',
      logger: memoryLogger(),
    });
    try {
      expect(runtime.database.schema).toBe('ingest_ops');
      expect(await countIn(runtime.database, 'ingest_ops', 'tables')).toBe(40);
      const [elsewhere] = await runtime.database.execute<{ n: number }>(
        `select count(*)::int as n from pg_class
          where relnamespace in ('public'::regnamespace) and relkind = 'r'`,
      );
      expect(elsewhere?.n).toBe(0);
      const [opstate] = await runtime.database.execute<{ present: boolean }>(
        `select to_regnamespace('opstate') is not null as present`,
      );
      expect(opstate?.present).toBe(false);
      await completesOne(runtime);
    } finally {
      await runtime.close();
    }
    const fromEnv = await openDatabase({ databaseUrl: db.url, max: 1 });
    const previous = process.env.OPSTATE_DB_SCHEMA;
    try {
      process.env.OPSTATE_DB_SCHEMA = 'ingest_ops';
      const viaEnv = await openDatabase({ databaseUrl: db.url, max: 1 });
      expect(viaEnv.schema).toBe('ingest_ops');
      expect(await migrate(viaEnv)).toEqual({ applied: 0, total: MIGRATIONS });
      await viaEnv.close();
      process.env.OPSTATE_DB_SCHEMA = 'Ingest-Ops';
      await expect(openDatabase({ databaseUrl: db.url })).rejects.toThrow(
        "OPSTATE_DB_SCHEMA must be a lowercase identifier: a-z, 0-9 and '_', not starting with a digit or pg_, at most 63 characters (default opstate); got 'Ingest-Ops', which has a character other than a-z, 0-9 and '_', or starts with a digit",
      );
    } finally {
      if (previous === undefined) delete process.env.OPSTATE_DB_SCHEMA;
      else process.env.OPSTATE_DB_SCHEMA = previous;
      await fromEnv.close();
    }
    await expect(
      createRuntime({ databaseUrl: db.url, databaseSchema: 'public' }),
    ).rejects.toMatchObject({
      code: OpstateErrorCode.CONFIG,
      message: expect.stringContaining("is where an application's own tables are"),
    });
    await expect(
      openDatabase({ databaseUrl: `${db.url}?search_path=ingest_ops` }),
    ).rejects.toMatchObject({
      code: OpstateErrorCode.CONFIG,
      message: expect.stringContaining('remove it from the URL'),
    });
  });

  it('moves once however often and from however many processes it migrates', async () => {
    const db = await freshDatabase();
    const legacy = openLegacyDatabase(db.url);
    try {
      await migrateIntoPublic(legacy);
    } finally {
      await legacy.close();
    }
    const a = await openDatabase({ databaseUrl: db.url, max: 1 });
    const b = await openDatabase({ databaseUrl: db.url, max: 1 });
    try {
      const results = await Promise.all([migrate(a), migrate(b)]);
      expect(results.filter((r) => r.moved !== undefined)).toHaveLength(1);
      expect(results.map((r) => r.applied)).toEqual([0, 0]);
      expect(await migrate(a)).toEqual({ applied: 0, total: MIGRATIONS });
      // opstate's rows were all the drizzle record held: it is gone, and its schema with it.
      const [drizzle] = await a.execute<{ present: boolean }>(
        `select to_regnamespace('drizzle') is not null as present`,
      );
      expect(drizzle?.present).toBe(false);
      expect(await countIn(a, 'public', 'tables')).toBe(0);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('refuses, changing nothing, when the drizzle record names opstate tables public no longer has', async () => {
    const db = await freshDatabase();
    const legacy = openLegacyDatabase(db.url);
    const current = await openDatabase({ databaseUrl: db.url, max: 1 });
    try {
      await migrateIntoPublic(legacy);
      await legacy.execute('drop table public.operation_tally');
      await expect(migrate(current)).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining(
          `drizzle.__drizzle_migrations records ${MIGRATIONS} of opstate's migrations, but public lacks their tables operation_tally; restore them`,
        ),
      });
      expect(await countIn(current, 'public', 'tables')).toBe(38);
      expect(await countIn(current, 'opstate', 'tables')).toBe(0);
    } finally {
      await current.close();
      await legacy.close();
    }
  });

  it('refuses, changing nothing, when opstate has tables both in public and in its schema', async () => {
    const db = await freshDatabase();
    const current = await openDatabase({ databaseUrl: db.url, max: 1 });
    const legacy = openLegacyDatabase(db.url);
    try {
      await migrate(current);
      await migrateIntoPublic(legacy); // an older build pointed at the same database
      await expect(migrate(current)).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining(
          `opstate's tables are in two places: drizzle.__drizzle_migrations records ${MIGRATIONS} of its migrations in public, and schema "opstate" already holds __drizzle_migrations, archive_record,`,
        ),
      });
      expect(await countIn(current, 'public', 'tables')).toBe(39);
      const [record] = await current.execute<{ n: number }>(
        'select count(*)::int as n from drizzle.__drizzle_migrations',
      );
      expect(record?.n).toBe(MIGRATIONS);
      // A connection that lost its search_path on the way (a pooler dropped it) is refused too.
      await expect(migrate({ ...legacy, schema: 'opstate' })).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining("the connection's schema is public, not opstate"),
      });
    } finally {
      await current.close();
      await legacy.close();
    }
  });
});
