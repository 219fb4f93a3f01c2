import { readFileSync } from 'node:fs';

/** How many migrations the repository ships (from drizzle-kit's journal), for migration tests. */
export const MIGRATION_COUNT: number = (
  JSON.parse(
    readFileSync(
      new URL('../../persistence/migrations/meta/_journal.json', import.meta.url),
      'utf8',
    ),
  ) as { entries: unknown[] }
).entries.length;
