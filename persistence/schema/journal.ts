import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
  interval,
  jsonb,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { oneOf } from './checks.ts';
import { operation } from './operation.ts';

/**
 * Append-only history of every status change (a trigger refuses UPDATE). `by` is the worker id,
 * a recovery path (`heartbeat_monitor`, `deadline`, `reconciler`, `broker`), `scheduler` or
 * `operator`; `attempt` is the attempt the event acted on. `from_status` is null for the creation row.
 *
 * Partitioned by ranges of `id` (migration 0023): ids come from one sequence, so they follow time,
 * and the primary key stays `id` alone. The control plane's leader keeps partitions made ahead of
 * the sequence (`opstate_history_extend`) and, under a retention policy (`history_retention`),
 * drops a whole partition once all of it is older than the policy keeps and none of its rows
 * belongs to a live operation (`opstate_history_prune`). The partitioning is the migration's:
 * drizzle knows the table as the one it reads and writes.
 */
export const operationTransition = pgTable(
  'operation_transition',
  {
    id: bigint('id', { mode: 'number' })
      .primaryKey()
      .default(sql`nextval('operation_transition_id_seq'::regclass)`),
    operationId: uuid('operation_id')
      .notNull()
      .references(() => operation.id, { onDelete: 'cascade' }),
    fromStatus: text('from_status'),
    toStatus: text('to_status').notNull(),
    event: text('event').notNull(),
    attempt: integer('attempt').notNull(),
    by: text('by').notNull(),
    reason: text('reason'),
    at: timestamp('at', { withTimezone: true }).notNull(),
  },
  (t) => [index('operation_transition_operation_idx').on(t.operationId, t.id)],
);

/**
 * Failure breadcrumbs keyed by (kind value, operation id, attempt); the kind is tied to the
 * operation's own kind by a row trigger (`opstate_row_kind_matches_operation`, migration 0021): a
 * breadcrumb whose kind is not its operation's is refused (23503). Per row, because every
 * transition's statement inserts into this table, most of them no row, and a statement trigger
 * would run for each.
 */
export const operationFailureEvent = pgTable(
  'operation_failure_event',
  {
    kind: text('kind').notNull(),
    operationId: uuid('operation_id').notNull(),
    attempt: integer('attempt').notNull(),
    error: jsonb('error').notNull(),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({
      name: 'operation_failure_event_pkey',
      columns: [t.kind, t.operationId, t.attempt],
    }),
    check('operation_failure_event_kind_check', oneOf(t.kind, OPERATION_KINDS)),
    foreignKey({
      name: 'operation_failure_event_operation_fk',
      columns: [t.operationId],
      foreignColumns: [operation.id],
    }).onDelete('cascade'),
    index('operation_failure_event_operation_idx').on(t.operationId),
    // The retention prune's check that nothing in a span is recent: a block range summary per
    // 128 pages, so the check under its lock reads the summaries, not the span.
    index('operation_failure_event_at_brin').using('brin', t.at).with({ autosummarize: true }),
  ],
);

/**
 * The step journal: durable checkpoints a handler records inside IN_PROGRESS. One row per
 * (operation, plan generation, step name), so a re-run of the step gets the recorded result back
 * instead of repeating the side effect. An operator's re-plan (`operation_replan`) starts a new
 * generation: the old steps stay, the handler plans again beside them.
 */
export const operationStep = pgTable(
  'operation_step',
  {
    id: bigint('id', { mode: 'number' })
      .notNull()
      .default(sql`nextval('operation_step_id_seq'::regclass)`),
    operationId: uuid('operation_id')
      .notNull()
      .references(() => operation.id, { onDelete: 'cascade' }),
    attempt: integer('attempt').notNull(),
    name: text('name').notNull(),
    state: text('state').notNull(),
    result: jsonb('result'),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
    generation: integer('generation').notNull().default(1),
  },
  (t) => [
    primaryKey({ name: 'operation_step_pkey', columns: [t.operationId, t.id] }),
    unique('operation_step_operation_generation_name_key').on(t.operationId, t.generation, t.name),
    // See operation_failure_event_at_brin.
    index('operation_step_at_brin').using('brin', t.at).with({ autosummarize: true }),
  ],
);

/**
 * Append-only record of operator re-plans: generation N (from 2) makes the journal's steps of
 * generations before N history, so the handler plans again instead of resuming a stale plan.
 */
export const operationReplan = pgTable(
  'operation_replan',
  {
    operationId: uuid('operation_id')
      .notNull()
      .references(() => operation.id, { onDelete: 'cascade' }),
    generation: integer('generation').notNull(),
    by: text('by').notNull(),
    reason: text('reason'),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'operation_replan_pkey', columns: [t.operationId, t.generation] }),
    check('operation_replan_generation_check', sql`${t.generation} >= 2`),
  ],
);

/**
 * How far the dispatch relay has passed the history: every SCHEDULE transition with an id at or
 * below `after_id` was published (or its operation had moved on). The transition row itself is the
 * dispatch's durable record (its operation, attempt and time; the queue and the message follow from
 * the operation), so a dispatch costs no row of its own: the relay reads the SCHEDULE transitions
 * past this point and moves it once per pass. One row.
 */
export const dispatchRelayCursor = pgTable(
  'dispatch_relay_cursor',
  {
    id: smallint('id').primaryKey().default(1),
    afterId: bigint('after_id', { mode: 'number' }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check('dispatch_relay_cursor_one_row', sql`${t.id} = 1`)],
);

/**
 * The retention policy of the transition history, one row: `keep` is how long a transition is kept
 * at least (null: everything is kept, the default); `partition_ids` is how many ids each partition
 * of the history spans, and so how much one pruning drops at once. Set by `opstate retention set`.
 */
export const historyRetention = pgTable(
  'history_retention',
  {
    id: smallint('id').primaryKey().default(1),
    keep: interval('keep'),
    partitionIds: bigint('partition_ids', { mode: 'number' }).notNull().default(5_000_000),
    journalDays: integer('journal_days').notNull().default(30),
    journalPrunedBelow: uuid('journal_pruned_below'),
    journalPrunedAt: timestamp('journal_pruned_at', { withTimezone: true }),
    setBy: text('set_by').notNull().default('migration'),
    setAt: timestamp('set_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check('history_retention_one_row', sql`${t.id} = 1`),
    check('history_retention_keep_check', sql`${t.keep} is null or ${t.keep} >= interval '1 day'`),
    check('history_retention_partition_ids_check', sql`${t.partitionIds} >= 1000`),
    check('history_retention_journal_days_check', sql`${t.journalDays} between 1 and 3660`),
  ],
);
