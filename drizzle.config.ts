import { defineConfig } from 'drizzle-kit';

// `npx drizzle-kit generate` writes forward-only SQL into persistence/migrations, which the
// runtime applies at start (persistence/migrate.ts) on Postgres and on PGlite alike.
export default defineConfig({
  dialect: 'postgresql',
  schema: './persistence/schema/index.ts',
  out: './persistence/migrations',
  migrations: { table: '__drizzle_migrations', schema: 'drizzle' },
});
