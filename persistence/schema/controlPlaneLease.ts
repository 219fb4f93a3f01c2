import { sql } from 'drizzle-orm';
import { bigint, check, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Who leads the control plane of a deployment (`name`), for how long, under which epoch. The
 * leader renews `expires_at` at every poll; a standby takes the row over once it has lapsed,
 * bumping `epoch`. Every control-plane write checks, in the same statement, that its epoch still
 * holds an unexpired lease (the database's clock decides), so a leader that was frozen past its
 * lease cannot apply a stale pass.
 */
export const controlPlaneLease = pgTable(
  'control_plane_lease',
  {
    name: text('name').primaryKey(),
    holder: text('holder').notNull(),
    epoch: bigint('epoch', { mode: 'number' }).notNull(),
    acquiredAt: timestamp('acquired_at', { withTimezone: true }).notNull(),
    renewedAt: timestamp('renewed_at', { withTimezone: true }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [check('control_plane_lease_epoch_check', sql`${t.epoch} >= 1`)],
);
