import { sql } from 'drizzle-orm';
import { check, integer, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { dataLocation } from './artifacts.ts';
import { oneOf } from './checks.ts';

/** The highest `max_live` a limit may hold: far above any pool of workers, below int overflow. */
export const MAX_FLOW_LIMIT = 1_000_000;

/**
 * How many operations may be live (SCHEDULED or IN_PROGRESS) at once on a location: of one kind
 * (`kind` set) or of any kind (`kind` null). The scheduler locks the rows that apply to what it is
 * about to claim and counts under that lock, so no number of claimers ever exceeds one. A limit of
 * 0 parks the location: nothing new starts there. One row per (location, kind), a null kind being
 * one value of its own (`nulls not distinct`).
 */
export const flowLimit = pgTable(
  'flow_limit',
  {
    locationId: uuid('location_id')
      .notNull()
      .references(() => dataLocation.id),
    kind: text('kind'),
    maxLive: integer('max_live').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    updatedBy: text('updated_by').notNull(),
  },
  (t) => [
    unique('flow_limit_scope_key').on(t.locationId, t.kind).nullsNotDistinct(),
    check('flow_limit_kind_check', sql`${t.kind} is null or ${oneOf(t.kind, OPERATION_KINDS)}`),
    check(
      'flow_limit_max_live_check',
      sql`${t.maxLive} between 0 and ${sql.raw(String(MAX_FLOW_LIMIT))}`,
    ),
  ],
);
