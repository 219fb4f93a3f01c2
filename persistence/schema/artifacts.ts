import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  pgTable,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';
import { LocationType } from '../../machines/routing.ts';
import { oneOf } from './checks.ts';

/** A storage location: one site's buffer, source area, long-term archive or processing area. */
export const dataLocation = pgTable(
  'data_location',
  {
    id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
    site: text('site').notNull(),
    name: text('name').notNull(),
    locationType: text('location_type').notNull(),
    storageRoot: text('storage_root').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique('data_location_site_name_key').on(t.site, t.name),
    check('data_location_type_check', oneOf(t.locationType, Object.values(LocationType))),
  ],
);

/**
 * The unit of fan-in after bundling: many raw data packages travel as one data transfer package.
 * Its lifecycle state is derived from its operations (`derivePackageState`), never stored.
 */
export const dataTransferPackage = pgTable('data_transfer_package', {
  id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
  name: text('name').notNull().unique('data_transfer_package_name_key'),
  checksum: text('checksum'),
  size: bigint('size', { mode: 'number' }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/** Packaged raw data files; belongs to at most one data transfer package once bundled. */
export const rawDataPackage = pgTable(
  'raw_data_package',
  {
    id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
    name: text('name').notNull().unique('raw_data_package_name_key'),
    dataTransferPackageId: uuid('data_transfer_package_id'),
    checksum: text('checksum'),
    size: bigint('size', { mode: 'number' }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('raw_data_package_dtp_idx').on(t.dataTransferPackageId),
    foreignKey({
      name: 'raw_data_package_dtp_fk',
      columns: [t.dataTransferPackageId],
      foreignColumns: [dataTransferPackage.id],
    }),
  ],
);

/** One file as the instrument wrote it; joins a raw data package when it is packaged. */
export const rawDataFile = pgTable(
  'raw_data_file',
  {
    id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
    name: text('name').notNull(),
    rawDataPackageId: uuid('raw_data_package_id').references(() => rawDataPackage.id),
    checksum: text('checksum'),
    size: bigint('size', { mode: 'number' }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('raw_data_file_package_idx').on(t.rawDataPackageId)],
);
