import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  check,
  foreignKey,
  index,
  type PgColumnBuilderBase,
  pgTable,
  text,
  uuid,
} from 'drizzle-orm/pg-core';
import { OperationKind } from '../../machines/OperationKind.ts';
import { dataLocation, dataTransferPackage, rawDataPackage } from './artifacts.ts';
import { operation } from './operation.ts';

/**
 * Builds one joined-table subtype: the shared key `operation_id`, a `kind` column that defaults to
 * the subtype's own kind and is checked against it, and a composite foreign key to the base's
 * `(id, kind)`. A subtype row under a base row of another kind is therefore rejected by the
 * database (23503), whatever the code does.
 */
function subtype<const N extends string, C extends Record<string, PgColumnBuilderBase>>(
  name: N,
  kind: OperationKind,
  columns: C,
  refs: (t: Record<string, AnyPgColumn>) => {
    indexed: AnyPgColumn;
    fks: [AnyPgColumn, AnyPgColumn][];
  },
) {
  return pgTable(
    name,
    {
      operationId: uuid('operation_id').primaryKey(),
      kind: text('kind').notNull().default(kind),
      ...columns,
    },
    (t) => [
      check(`${name}_kind_check`, sql`${t.kind} = '${sql.raw(kind)}'`),
      foreignKey({
        name: `${name}_base_fk`,
        columns: [t.operationId, t.kind],
        foreignColumns: [operation.id, operation.kind],
      }).onDelete('cascade'),
      ...foreignKeys(name, refs(t as unknown as Record<string, AnyPgColumn>)),
    ],
  );
}

/** Short, explicit names: drizzle's default ones pass Postgres' 63-character identifier limit. */
function foreignKeys(
  table: string,
  spec: { indexed: AnyPgColumn; fks: [AnyPgColumn, AnyPgColumn][] },
) {
  return [
    index(`${table}_artifact_idx`).on(spec.indexed),
    ...spec.fks.map(([column, target]) =>
      foreignKey({
        name: `${table}_${column.name}_fk`,
        columns: [column],
        foreignColumns: [target],
      }),
    ),
  ];
}

type Cols = Record<string, AnyPgColumn>;
const at = (t: Cols, key: string): AnyPgColumn => t[key] as AnyPgColumn;

/** Packaging: raw data files at a location become the raw data package. */
export const packagingOperation = subtype(
  'packaging_operation',
  OperationKind.RAW_DATA_PACKAGE,
  {
    rawDataPackageId: uuid('raw_data_package_id').notNull(),
    locationId: uuid('location_id').notNull(),
  },
  (t) => ({
    indexed: at(t, 'rawDataPackageId'),
    fks: [
      [at(t, 'rawDataPackageId'), rawDataPackage.id],
      [at(t, 'locationId'), dataLocation.id],
    ],
  }),
);

/** Bundling: raw data packages at a location become the data transfer package. */
export const bundlingOperation = subtype(
  'bundling_operation',
  OperationKind.DATA_TRANSFER_PACKAGE,
  {
    dataTransferPackageId: uuid('data_transfer_package_id').notNull(),
    locationId: uuid('location_id').notNull(),
  },
  (t) => ({
    indexed: at(t, 'dataTransferPackageId'),
    fks: [
      [at(t, 'dataTransferPackageId'), dataTransferPackage.id],
      [at(t, 'locationId'), dataLocation.id],
    ],
  }),
);

/** Transfer: a data transfer package from one location to another. */
export const transferOperation = subtype(
  'transfer_operation',
  OperationKind.TRANSFER,
  {
    dataTransferPackageId: uuid('data_transfer_package_id').notNull(),
    sourceLocationId: uuid('source_location_id').notNull(),
    destinationLocationId: uuid('destination_location_id').notNull(),
  },
  (t) => ({
    indexed: at(t, 'dataTransferPackageId'),
    fks: [
      [at(t, 'dataTransferPackageId'), dataTransferPackage.id],
      [at(t, 'sourceLocationId'), dataLocation.id],
      [at(t, 'destinationLocationId'), dataLocation.id],
    ],
  }),
);

/** Unpack: a transferred data transfer package back into its raw data packages (fan-out). */
export const unpackOperation = subtype(
  'unpack_operation',
  OperationKind.UNPACK,
  {
    dataTransferPackageId: uuid('data_transfer_package_id').notNull(),
    locationId: uuid('location_id').notNull(),
  },
  (t) => ({
    indexed: at(t, 'dataTransferPackageId'),
    fks: [
      [at(t, 'dataTransferPackageId'), dataTransferPackage.id],
      [at(t, 'locationId'), dataLocation.id],
    ],
  }),
);

/** Long-term archive: a raw data package into the archive, at a stable archive key. */
export const longTermArchiveOperation = subtype(
  'long_term_archive_operation',
  OperationKind.LONG_TERM_ARCHIVE,
  {
    rawDataPackageId: uuid('raw_data_package_id').notNull(),
    sourceLocationId: uuid('source_location_id').notNull(),
    destinationLocationId: uuid('destination_location_id').notNull(),
    archiveKey: text('archive_key'),
  },
  (t) => ({
    indexed: at(t, 'rawDataPackageId'),
    fks: [
      [at(t, 'rawDataPackageId'), rawDataPackage.id],
      [at(t, 'sourceLocationId'), dataLocation.id],
      [at(t, 'destinationLocationId'), dataLocation.id],
    ],
  }),
);

/** Staging: a raw data package brought to a processing location (download + unpack). */
export const stagingOperation = subtype(
  'staging_operation',
  OperationKind.STAGING,
  {
    rawDataPackageId: uuid('raw_data_package_id').notNull(),
    sourceLocationId: uuid('source_location_id').notNull(),
    destinationLocationId: uuid('destination_location_id').notNull(),
  },
  (t) => ({
    indexed: at(t, 'rawDataPackageId'),
    fks: [
      [at(t, 'rawDataPackageId'), rawDataPackage.id],
      [at(t, 'sourceLocationId'), dataLocation.id],
      [at(t, 'destinationLocationId'), dataLocation.id],
    ],
  }),
);

/** The subtype table of each kind: exhaustive, so a new kind without a table fails to compile. */
export const SUBTYPE_TABLE: Readonly<
  Record<
    OperationKind,
    | typeof packagingOperation
    | typeof bundlingOperation
    | typeof transferOperation
    | typeof unpackOperation
    | typeof longTermArchiveOperation
    | typeof stagingOperation
  >
> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: packagingOperation,
  [OperationKind.DATA_TRANSFER_PACKAGE]: bundlingOperation,
  [OperationKind.TRANSFER]: transferOperation,
  [OperationKind.UNPACK]: unpackOperation,
  [OperationKind.LONG_TERM_ARCHIVE]: longTermArchiveOperation,
  [OperationKind.STAGING]: stagingOperation,
});
