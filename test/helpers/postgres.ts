import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

/**
 * Per-file test databases on the real Postgres (127.0.0.1:5432, trust auth). Each test file
 * creates its own uniquely named database in `beforeAll` and drops it in `afterAll`, so files can
 * run side by side and nothing leaks between them.
 *
 * Set `OPSTATE_TEST_ADMIN_URL` to point somewhere else. When Postgres cannot be reached, the
 * helpers throw: the tests fail, they never skip.
 */
const CANDIDATES = process.env.OPSTATE_TEST_ADMIN_URL
  ? [process.env.OPSTATE_TEST_ADMIN_URL]
  : ['postgres://postgres@127.0.0.1:5432/postgres', 'postgres://root@127.0.0.1:5432/postgres'];

let adminUrl: Promise<string | undefined> | undefined;

async function probe(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 5, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** The admin URL that works; throws when none does (a missing database fails the run). */
export async function findAdminUrl(): Promise<string> {
  adminUrl ??= (async () => {
    for (const url of CANDIDATES) if (await probe(url)) return url;
    return undefined;
  })();
  const url = await adminUrl;
  if (url === undefined) {
    throw new Error(
      `Postgres is unreachable (tried ${CANDIDATES.join(', ')}): the integration tests need it and never skip`,
    );
  }
  return url;
}

export interface TestDatabase {
  readonly name: string;
  /** Connection URL of the new database. */
  readonly url: string;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * The environment variable naming the run's migrated template database (set by the global setup):
 * a database asked for `migrated` is a copy of it, which is several times cheaper than running
 * every migration again, and `migrate()` on the copy finds nothing to do.
 */
export const TEMPLATE_DATABASE_ENV = 'OPSTATE_TEST_TEMPLATE_DATABASE';

/**
 * Creates a database named `<prefix>_<random>`: empty, or with `migrated`, a copy of the run's
 * migrated template when there is one (an empty one otherwise: the caller migrates either way).
 *
 * @example
 * ```ts
 * let db: TestDatabase;
 * beforeAll(async () => { db = await createTestDatabase(); });
 * afterAll(async () => { await dropTestDatabase(db); });
 * ```
 */
export async function createTestDatabase(
  prefix = 'opstate_t',
  options: { readonly migrated?: boolean } = {},
): Promise<TestDatabase> {
  const admin = await findAdminUrl();
  if (admin === undefined) throw new Error('Postgres is unreachable at 127.0.0.1:5432');
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`bad test database name ${name}`);
  const template = options.migrated ? process.env[TEMPLATE_DATABASE_ENV] : undefined;
  if (template !== undefined && !/^[a-z0-9_]+$/.test(template)) {
    throw new Error(`bad template database name ${template}`);
  }
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`create database ${name}${template ? ` template ${template}` : ''}`);
  } finally {
    await sql.end({ timeout: 5 });
  }
  return { name, url: withDatabase(admin, name) };
}

/**
 * Creates the run's migrated template, `<prefix>_<random>`, and returns it once no session is
 * left on it (a copy needs the template to itself).
 */
export async function createTemplateDatabase(
  migrateAt: (url: string) => Promise<void>,
  prefix = 'opstate_template',
): Promise<TestDatabase> {
  const db = await createTestDatabase(prefix);
  await migrateAt(db.url);
  const admin = postgres(await findAdminUrl(), { max: 1, onnotice: () => {} });
  try {
    for (let i = 0; i < 250; i++) {
      const [row] =
        await admin`select count(*)::int as n from pg_stat_activity where datname = ${db.name}`;
      if (row?.n === 0) return db;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`sessions stayed open on the template database ${db.name}`);
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/** Drops a test database, closing any connection still open on it. */
export async function dropTestDatabase(db: TestDatabase | undefined): Promise<void> {
  if (db === undefined) return;
  const admin = await findAdminUrl();
  if (admin === undefined) return;
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`drop database if exists ${db.name} with (force)`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}
