import { sql } from 'drizzle-orm';
import {
  check,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import {
  CIRCUIT_STATES,
  type CircuitFailure,
  CircuitState,
} from '../../machines/circuitBreaker.ts';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { dataLocation } from './artifacts.ts';
import { oneOf } from './checks.ts';

/**
 * One circuit breaker per (kind, target location): consecutive failures of that pair's
 * operations open it, and while it is OPEN the scheduler leaves the pair's PENDING operations
 * where they are. `version` is a compare-and-set counter so that an operator's reset is never
 * overwritten by a control-plane pass computed from the row before it.
 */
export const circuitBreaker = pgTable(
  'circuit_breaker',
  {
    kind: text('kind').notNull(),
    locationId: uuid('location_id')
      .notNull()
      .references(() => dataLocation.id),
    state: text('state').notNull().default(CircuitState.CLOSED),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    openedAt: timestamp('opened_at', { withTimezone: true }),
    lastFailure: jsonb('last_failure').$type<CircuitFailure>(),
    version: integer('version').notNull().default(1),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'circuit_breaker_pkey', columns: [t.kind, t.locationId] }),
    check('circuit_breaker_kind_check', oneOf(t.kind, OPERATION_KINDS)),
    check('circuit_breaker_state_check', oneOf(t.state, CIRCUIT_STATES)),
    check('circuit_breaker_failures_check', sql`${t.consecutiveFailures} >= 0`),
    check('circuit_breaker_opened_check', sql`(${t.state} = 'CLOSED') = (${t.openedAt} is null)`),
  ],
);
