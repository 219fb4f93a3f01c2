import { sql } from 'drizzle-orm';
import { bigint, check, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Where a declared pipeline's leader pass stands in `operation_transition`: every completion at
 * or below `after_id` has had its next stages created. Written in the transaction that creates
 * them, so a leader that dies between a completion and the next stage's creation leaves the
 * completion above the mark, and the next leader reads it again.
 */
export const pipelineCursor = pgTable(
  'pipeline_cursor',
  {
    name: text('name').primaryKey(),
    afterId: bigint('after_id', { mode: 'number' }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check('pipeline_cursor_after_check', sql`${t.afterId} >= 0`)],
);
