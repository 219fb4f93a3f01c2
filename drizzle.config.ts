import { defineConfig } from 'drizzle-kit';

// `npx drizzle-kit generate` writes forward-only SQL into persistence/migrations, which the
// runtime applies at start (persistence/migrate.ts) on Postgres and on PGlite alike, into
// opstate's own schema and record: apply them with `opstate migrate`, not `drizzle-kit migrate`
// (which would write into public). See docs/database-schema.md.
export default defineConfig({
  dialect: 'postgresql',
  schema: './persistence/schema/index.ts',
  out: './persistence/migrations',
  migrations: { table: '__drizzle_migrations', schema: 'opstate' },
});
