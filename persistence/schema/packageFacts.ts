import { sql } from 'drizzle-orm';
import { index, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { dataLocation, rawDataPackage } from './artifacts.ts';
import { operation } from './operation.ts';

/**
 * A raw data package's files are all registered at `location_id` (`runtime.artifacts.
 * declareFilesComplete`, `opstate package files-complete`): the fact a pipeline's entry stage
 * (its packaging) is created from. One per package, written once; `packaging_operation_id` is set
 * in the transaction the pipeline's pass creates that packaging in (or adopts one that exists), so
 * a pass that dies before it commits leaves the fact unconsumed and the next pass creates it once.
 */
export const packageFilesComplete = pgTable(
  'package_files_complete',
  {
    rawDataPackageId: uuid('raw_data_package_id')
      .primaryKey()
      .references(() => rawDataPackage.id),
    locationId: uuid('location_id')
      .notNull()
      .references(() => dataLocation.id),
    declaredBy: text('declared_by').notNull(),
    declaredAt: timestamp('declared_at', { withTimezone: true }).notNull().defaultNow(),
    packagingOperationId: uuid('packaging_operation_id').references(() => operation.id),
  },
  (t) => [
    index('package_files_complete_due_idx')
      .on(t.locationId, t.declaredAt)
      .where(sql`packaging_operation_id is null`),
  ],
);
