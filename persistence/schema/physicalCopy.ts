import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
  pgTable,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { PHYSICAL_COPY_STATUSES } from '../../machines/physicalCopyMachine.ts';
import { ArtifactType } from '../ArtifactType.ts';
import { dataLocation, dataTransferPackage, rawDataFile, rawDataPackage } from './artifacts.ts';
import { oneOf } from './checks.ts';

/**
 * One artifact at one location. `artifact_type` + `artifact_id` name the artifact; the subtype
 * table of that artifact type carries the real foreign key, tied to the base row by a composite
 * key so the two can never disagree.
 *
 * The partial unique index `physical_copy_live_key` is the idempotent-completion invariant: a
 * second live (not DELETED) copy of one artifact at one location cannot exist, whatever the
 * number of racing retries. `status` moves only through the physical-copy machine
 * (`CopyLifecycle`), each move recorded in `physical_copy_transition`.
 */
export const physicalCopy = pgTable(
  'physical_copy',
  {
    id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
    artifactType: text('artifact_type').notNull(),
    artifactId: uuid('artifact_id').notNull(),
    locationId: uuid('location_id')
      .notNull()
      .references(() => dataLocation.id),
    status: text('status').notNull().default('PRESENT'),
    path: text('path'),
    checksum: text('checksum'),
    size: bigint('size', { mode: 'number' }),
    deletionFailureCount: integer('deletion_failure_count').notNull().default(0),
    lastError: text('last_error'),
    /**
     * Compare-and-set counter. Every status change bumps it, and so does everything that changes a
     * fact a deletion decides on (a retention claim taken on the copy, a failed re-verification of
     * its archive), so a deletion decided on older facts can never be written.
     */
    version: integer('version').notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique('physical_copy_id_artifact_key').on(t.id, t.artifactType, t.artifactId),
    uniqueIndex('physical_copy_live_key')
      .on(t.artifactType, t.artifactId, t.locationId)
      .where(sql`status <> 'DELETED'`),
    index('physical_copy_artifact_idx').on(t.artifactId),
    index('physical_copy_location_idx').on(t.locationId),
    // Deletions scheduled or running, for the deleters' claim pass.
    index('physical_copy_deleting_idx')
      .on(t.status)
      .where(sql`status in ('DELETION_SCHEDULED', 'DELETION_IN_PROGRESS')`),
    // The attention list: copies whose deletion failed (kept, waiting for an operator).
    index('physical_copy_deletion_failed_idx')
      .on(t.updatedAt, t.id)
      .where(sql`status = 'DELETION_FAILED'`),
    check('physical_copy_status_check', oneOf(t.status, PHYSICAL_COPY_STATUSES)),
    check('physical_copy_artifact_type_check', oneOf(t.artifactType, Object.values(ArtifactType))),
    check('physical_copy_deletion_failure_count_check', sql`${t.deletionFailureCount} >= 0`),
  ],
);

/**
 * Append-only history of every copy status change (a trigger refuses UPDATE): which event, who
 * (`by`: a deleter id or `operator`), why, and the version the change wrote.
 */
export const physicalCopyTransition = pgTable(
  'physical_copy_transition',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    physicalCopyId: uuid('physical_copy_id')
      .notNull()
      .references(() => physicalCopy.id, { onDelete: 'cascade' }),
    fromStatus: text('from_status').notNull(),
    toStatus: text('to_status').notNull(),
    event: text('event').notNull(),
    version: integer('version').notNull(),
    by: text('by').notNull(),
    reason: text('reason'),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('physical_copy_transition_copy_idx').on(t.physicalCopyId, t.id)],
);

function copySubtype<const N extends string, const C extends string>(
  table: N,
  artifactType: ArtifactType,
  artifactColumn: C,
  artifactTable: typeof rawDataFile | typeof rawDataPackage | typeof dataTransferPackage,
) {
  return pgTable(
    table,
    {
      physicalCopyId: uuid('physical_copy_id').primaryKey(),
      artifactType: text('artifact_type').notNull().default(artifactType),
      artifactId: uuid(artifactColumn).notNull(),
    },
    (t) => [
      check(`${table}_artifact_type_check`, sql`${t.artifactType} = '${sql.raw(artifactType)}'`),
      foreignKey({
        name: `${table}_base_fk`,
        columns: [t.physicalCopyId, t.artifactType, t.artifactId],
        foreignColumns: [physicalCopy.id, physicalCopy.artifactType, physicalCopy.artifactId],
      }).onDelete('cascade'),
      foreignKey({
        name: `${table}_artifact_fk`,
        columns: [t.artifactId],
        foreignColumns: [artifactTable.id],
      }),
      index(`${table}_artifact_idx`).on(t.artifactId),
    ],
  );
}

export const rawDataFilePhysicalCopy = copySubtype(
  'raw_data_file_physical_copy',
  ArtifactType.RAW_DATA_FILE,
  'raw_data_file_id',
  rawDataFile,
);
export const rawDataPackagePhysicalCopy = copySubtype(
  'raw_data_package_physical_copy',
  ArtifactType.RAW_DATA_PACKAGE,
  'raw_data_package_id',
  rawDataPackage,
);
export const dataTransferPackagePhysicalCopy = copySubtype(
  'data_transfer_package_physical_copy',
  ArtifactType.DATA_TRANSFER_PACKAGE,
  'data_transfer_package_id',
  dataTransferPackage,
);
