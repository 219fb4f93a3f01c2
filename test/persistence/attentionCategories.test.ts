import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printAttention } from '../../cli/attentionFromEnv.ts';
import { attentionSection } from '../../dashboard/attentionView.ts';
import {
  ATTENTION_CATEGORIES,
  ATTENTION_TITLES,
  AttentionCategory,
  type AttentionItem,
  sortAttention,
} from '../../machines/attention.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OpstateError } from '../../machines/OpstateError.ts';
import { type AttentionSection, loadAttention } from '../../persistence/loadAttention.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { countIndexed, INDEXED_CATEGORIES } from '../../persistence/sql/selectAttention.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const timing = {
  heartbeatTimeoutMs: 5 * 60_000,
  reconcilerFloorMs: 60 * 60_000,
  deadlines: DEFAULT_DEADLINES_MS,
};
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

/** An item of `category` about operation `id`, listed for 3 minutes. */
const itemOf = (category: AttentionCategory, id: string): AttentionItem => ({
  category,
  subject: { type: 'operation', id },
  kind: null,
  state: 'PENDING',
  since: new Date(NOW - 3 * 60_000).toISOString(),
  why: `why ${category}`,
});

/** A section of one item of `category`. */
const sectionOf = (category: AttentionCategory): AttentionSection => ({
  category,
  total: 1,
  totalCapped: false,
  items: [itemOf(category, '0190c3d2-0000-7000-8000-000000000001')],
  next: null,
});

let db: TestDatabase;
let database: Database;
beforeAll(async () => {
  db = await createTestDatabase('opstate_attention_vocab', { migrated: true });
  database = await openDatabase({ databaseUrl: db.url });
  await migrate(database);
});
afterAll(async () => {
  await database?.close();
  await dropTestDatabase(db);
});

/**
 * The attention categories are one list (`ATTENTION_CATEGORIES`); everything that names them
 * takes it from there. Each place is asked about every category, so a category missing anywhere
 * fails here.
 */
describe('the attention categories, everywhere they are named', () => {
  it('are the values of AttentionCategory, in the order an operator reads them', () => {
    expect(ATTENTION_CATEGORIES).toEqual(Object.values(AttentionCategory));
    expect(new Set(ATTENTION_CATEGORIES).size).toBe(ATTENTION_CATEGORIES.length);
    expect(Object.keys(ATTENTION_TITLES).sort()).toEqual([...ATTENTION_CATEGORIES].sort());
  });

  it('the list loads every category, in that order, and refuses one it does not know', async () => {
    const list = await loadAttention(database, { now: NOW, timing, heartbeats: new Map() });
    expect(list.sections.map((s) => s.category)).toEqual(ATTENTION_CATEGORIES);
    // The categories counted from a partial index in one statement are counted by their names.
    expect(INDEXED_CATEGORIES.filter((c) => !ATTENTION_CATEGORIES.includes(c))).toEqual([]);
    expect(await countIndexed(database)).toEqual(
      Object.fromEntries(INDEXED_CATEGORIES.map((c) => [c, 0])),
    );
    const refused = await loadAttention(database, {
      now: NOW,
      timing,
      heartbeats: new Map(),
      category: 'stale' as AttentionCategory,
    }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpstateError);
    expect((refused as OpstateError).code).toBe('BAD_INPUT');
    expect((refused as OpstateError).message).toBe(
      `unknown attention category "stale"; use one of ${ATTENTION_CATEGORIES.join(', ')}`,
    );
  });

  it.each(ATTENTION_CATEGORIES)(
    '%s: titled, loaded alone, sorted, shown by the dashboard and opstate status, and in the docs',
    async (category) => {
      const title = ATTENTION_TITLES[category];
      expect(title).toMatch(/^[A-Z][a-z ]+$/);
      // The database side: the category's own loader answers a page of it (nothing planted here).
      const alone = await loadAttention(database, {
        now: NOW,
        timing,
        heartbeats: new Map(),
        category,
      });
      expect(alone.sections).toEqual([
        { category, total: 0, totalCapped: false, items: [], next: null },
      ]);
      // Sorted by its place in the list, ahead of every later category.
      const later = ATTENTION_CATEGORIES.slice(ATTENTION_CATEGORIES.indexOf(category) + 1);
      const mixed = [...later.map((c, i) => itemOf(c, `op-${i}`)), itemOf(category, 'mine')];
      expect(sortAttention(mixed)[0]?.category).toBe(category);
      // The dashboard's section and opstate status's text both carry its title.
      const html = attentionSection(sectionOf(category)).value;
      expect(html).toContain(`data-category="${category}"`);
      expect(html).toContain(`<h3>${title} `);
      const lines: string[] = [];
      printAttention(
        {
          at: new Date(NOW).toISOString(),
          heartbeatsVisible: true,
          sections: [sectionOf(category)],
        },
        { out: (l) => lines.push(l), err: (l) => lines.push(l) },
        NOW,
      );
      expect(lines).toContain(`  ${title} (1)`);
      // The dashboard guide's table has a row for it.
      expect(read('docs/dashboard.md')).toContain(`\n| ${title.toLowerCase()} | `);
    },
  );
});
