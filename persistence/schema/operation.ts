import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { MAX_DEADLINE_MS } from '../../machines/deadlines.ts';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import type { OperationError } from '../../machines/operationMachine.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../machines/priority.ts';
import { LocationType, OperationType } from '../../machines/routing.ts';
import { dataLocation } from './artifacts.ts';
import { oneOf } from './checks.ts';
import { physicalCopy } from './physicalCopy.ts';
import { pipelineRollback } from './pipeline.ts';

/**
 * N co-created operations. Its status is derived from its children (`deriveGroupStatus`), never
 * stored. `active` is the retention claim of a staging job: while true, the copies its operations
 * stage must not be deleted.
 */
export const operationGroup = pgTable('operation_group', {
  id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
  name: text('name'),
  active: boolean('active').notNull().default(false),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  releasedAt: timestamp('released_at', { withTimezone: true }),
  /** Who created it (a staging on request: the operator or service that asked). */
  createdBy: text('created_by'),
  /** Who released its claim, when it was released by someone named. */
  releasedBy: text('released_by'),
});

/**
 * The base of every operation (joined-table inheritance). The columns beside `snapshot` are a
 * projection of it kept in step by every write, so the hot queries never parse jsonb. `version`
 * is the compare-and-set counter; `attempt` is the fencing epoch. The table is kept at fillfactor
 * 75 (migration 0022, which drizzle's schema cannot state): each status change writes a new row
 * version, and room left on the page keeps it beside the old one.
 */
export const operation = pgTable(
  'operation',
  {
    id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
    kind: text('kind').notNull(),
    operationType: text('operation_type').notNull(),
    locationType: text('location_type').notNull(),
    status: text('status').notNull(),
    attempt: integer('attempt').notNull().default(1),
    retryCount: integer('retry_count').notNull().default(0),
    maxRetries: integer('max_retries').notNull(),
    snapshot: jsonb('snapshot').notNull(),
    machineId: text('machine_id').notNull(),
    machineVersion: integer('machine_version').notNull(),
    xstateVersion: text('xstate_version').notNull(),
    version: integer('version').notNull().default(0),
    groupId: uuid('group_id').references(() => operationGroup.id),
    notBefore: timestamp('not_before', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    scheduledAt: timestamp('scheduled_at', { withTimezone: true }),
    startedAt: timestamp('started_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    /** When it entered its current status (its last transition's time). */
    statusChangedAt: timestamp('status_changed_at', { withTimezone: true }).notNull().defaultNow(),
    lastError: jsonb('last_error').$type<OperationError>(),
    workerId: text('worker_id'),
    /**
     * The location the operation acts on (its subtype's destination, else its location): with
     * `kind`, the pair a circuit breaker guards. Set at create time; null only on rows created
     * before the column existed.
     */
    targetLocationId: uuid('target_location_id').references(() => dataLocation.id),
    /**
     * How long one attempt may stay IN_PROGRESS from its START (ms), given at submit; null: the
     * kind's configured deadline.
     */
    deadlineMs: integer('deadline_ms'),
    /** Higher is claimed first among due operations (FIFO within one), given at submit. */
    priority: smallint('priority').notNull().default(0),
    /**
     * The site and name of the location the operation routes on (`ROUTED_LOCATION_FIELD`: the one
     * whose storage its handler must reach), set at create time with `location_type` as that
     * location's type: the queue is `<site>_<location>_<location type>_<operation type>`. Null
     * together only on rows whose target no longer names a location that can route; those keep
     * the legacy queue `<location type>_<operation type>`.
     */
    routeSite: text('route_site'),
    routeLocation: text('route_location'),
    /**
     * The artifact a pipeline stage acts on (its subtype's raw data package or data transfer
     * package), set only on the operations a declared pipeline creates; null on every other.
     * With `kind` and `target_location_id` it is the key `operation_pipeline_live_key` keeps to
     * one live operation.
     */
    pipelineSubjectId: uuid('pipeline_subject_id'),
    /**
     * The rollback that redoes this operation: from then on the pipeline's pass neither reads its
     * completion nor counts it as existing, so the stage is created again (once) from the re-run.
     */
    supersededBy: uuid('superseded_by').references(() => pipelineRollback.id),
    /** The rollback that caused this operation (its target stage, or a later one the pass created). */
    rollbackId: uuid('rollback_id').references(() => pipelineRollback.id),
  },
  (t) => [
    check('operation_kind_check', oneOf(t.kind, OPERATION_KINDS)),
    check('operation_status_check', oneOf(t.status, OPERATION_STATUSES)),
    check('operation_type_check', oneOf(t.operationType, Object.values(OperationType))),
    check('operation_location_type_check', oneOf(t.locationType, Object.values(LocationType))),
    check('operation_attempt_check', sql`${t.attempt} >= 1`),
    check('operation_route_check', sql`(${t.routeSite} is null) = (${t.routeLocation} is null)`),
    check(
      'operation_priority_check',
      sql`${t.priority} between ${sql.raw(String(MIN_PRIORITY))} and ${sql.raw(String(MAX_PRIORITY))}`,
    ),
    check(
      'operation_deadline_ms_check',
      sql`${t.deadlineMs} between 1 and ${sql.raw(String(MAX_DEADLINE_MS))}`,
    ),
    // Due work for the scheduler: PENDING in not_before order (null = now).
    index('operation_due_idx')
      .on(t.notBefore.asc().nullsFirst(), t.createdAt)
      .where(sql`status = 'PENDING'`),
    // Due work by priority: the scheduler reads it highest first, then in due order within one.
    index('operation_priority_due_idx')
      .on(t.priority.desc(), t.notBefore.asc().nullsFirst(), t.createdAt)
      .where(sql`status = 'PENDING'`),
    // Running work for the heartbeat monitor and the reconciler.
    index('operation_active_idx')
      .on(t.status, t.startedAt)
      .where(sql`status in ('SCHEDULED', 'IN_PROGRESS')`),
    // The operations of one kind and status page by page. Not the live statuses: every operation
    // passes through SCHEDULED and IN_PROGRESS, and an entry for each would cost SCHEDULE and START
    // an index write apiece; those few are listed off operation_active_idx instead.
    index('operation_kind_status_created_idx')
      .on(t.kind, t.status, t.createdAt, t.id)
      .where(sql`status not in ('SCHEDULED', 'IN_PROGRESS')`),
    // The attention list: FAILED operations an operator has not cancelled, oldest first.
    index('operation_failed_idx')
      .on(t.finishedAt, t.id)
      .where(sql`status = 'FAILED' and coalesce(last_error->>'code', '') <> 'CANCELLED'`),
    // The attention list: live operations that have spent their retry budget.
    index('operation_retry_cap_idx')
      .on(t.id)
      .where(
        sql`status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS') and retry_count > 0 and retry_count >= max_retries`,
      ),
    // The attention list: PENDING operations by the time they became due.
    index('operation_pending_due_idx')
      .on(sql`greatest(not_before, status_changed_at)`, t.id)
      .where(sql`status = 'PENDING'`),
    // PENDING work per (target, kind), each scope by priority then in due order: the claim reads
    // a flow-limit scope with little room from here, as many rows as it has room for, and never
    // the backlog of a full one; counts of what a breaker or a limit parks read it too.
    index('operation_pending_scope_idx')
      .on(
        t.targetLocationId,
        t.kind,
        t.priority.desc(),
        t.notBefore.asc().nullsFirst(),
        t.createdAt,
      )
      .where(sql`status = 'PENDING'`),
    // Live work per (target, kind): a half-open circuit breaker admits one probe at a time, and
    // the claim counts what runs at the locations that have a flow limit (one range each).
    index('operation_target_live_idx')
      .on(t.targetLocationId, t.kind)
      .where(sql`status in ('SCHEDULED', 'IN_PROGRESS')`),
    index('operation_group_idx').on(t.groupId).where(sql`group_id is not null`),
    index('operation_rollback_idx').on(t.rollbackId).where(sql`rollback_id is not null`),
    // A pipeline's exactly-once: at most one live operation per (kind, subject, location) among
    // those a pipeline created. A second insert (a leader that lost its lease, a pass repeated
    // after a crash) is refused by the database whatever the code decided.
    uniqueIndex('operation_pipeline_live_key')
      .on(t.kind, t.pipelineSubjectId, t.targetLocationId)
      .where(
        sql`pipeline_subject_id is not null and status in ('PENDING', 'SCHEDULED', 'IN_PROGRESS')`,
      ),
  ],
);

/**
 * The operations per kind × status, as signed amounts that add up to the counts: statement-level
 * triggers on `operation` append one row per kind and status a statement changed (+ for the rows
 * it brought into that status, − for those it took out), in the writer's own transaction, so the
 * sum is exact in every snapshot. Counting reads these rows instead of every operation; the
 * control plane's leader folds them into one row per pair now and then
 * (`opstate_fold_operation_tally()`). Rows are only ever inserted and deleted (no counter row
 * is updated, so concurrent writers never wait on one another here).
 */
export const operationTally = pgTable('operation_tally', {
  kind: text('kind').notNull(),
  status: text('status').notNull(),
  n: bigint('n', { mode: 'number' }).notNull(),
});

/** A link from an operation to a physical copy, one table per direction. */
function copyLink<const N extends string>(name: N) {
  return pgTable(
    name,
    {
      operationId: uuid('operation_id')
        .notNull()
        .references(() => operation.id, { onDelete: 'cascade' }),
      physicalCopyId: uuid('physical_copy_id')
        .notNull()
        .references(() => physicalCopy.id),
    },
    (t) => [
      primaryKey({ name: `${name}_pkey`, columns: [t.operationId, t.physicalCopyId] }),
      index(`${name}_copy_idx`).on(t.physicalCopyId),
    ],
  );
}

/** Copies an operation consumes. Lineage runs through copies, never operation to operation. */
export const operationInput = copyLink('operation_input');

/** Copies an operation produced (or found already present when it completed). */
export const operationOutput = copyLink('operation_output');
