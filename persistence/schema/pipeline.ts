import { sql } from 'drizzle-orm';
import { bigint, check, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

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

/**
 * A rollback up a pipeline's lineage (`opstate rollback`, `runtime.rollback`): an operator asked
 * that `artifact_id`'s copies be produced again from `stage` on. Written with its effects in one
 * transaction: the operations it redoes point at it (`operation.superseded_by`), and every
 * operation it causes, the target stage's created with it and each later stage's created by the
 * pipeline's pass, carries its id (`operation.rollback_id`). `plan` is what it showed: the
 * operations redone and the copies superseded.
 */
export const pipelineRollback = pgTable(
  'pipeline_rollback',
  {
    id: uuid('id').primaryKey(),
    pipeline: text('pipeline').notNull(),
    artifactType: text('artifact_type').notNull(),
    artifactId: uuid('artifact_id').notNull(),
    stage: text('stage').notNull(),
    requestedBy: text('requested_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    plan: jsonb('plan').notNull(),
  },
  (t) => [
    index('pipeline_rollback_artifact_idx').on(t.artifactId, t.createdAt),
    check(
      'pipeline_rollback_artifact_type_check',
      sql`${t.artifactType} in ('raw_data_package', 'data_transfer_package')`,
    ),
  ],
);
