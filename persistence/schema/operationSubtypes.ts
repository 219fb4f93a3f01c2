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
 * What each reference column of a subtype points at. A subtype's foreign keys are derived from its
 * column names, so adding a kind means naming its columns, nothing more.
 */
const REFERENCES: Readonly<Record<string, AnyPgColumn>> = {
  rawDataPackageId: rawDataPackage.id,
  dataTransferPackageId: dataTransferPackage.id,
  locationId: dataLocation.id,
  sourceLocationId: dataLocation.id,
  destinationLocationId: dataLocation.id,
};

/** The column naming the artifact an operation works on: indexed for lineage queries. */
const ARTIFACT_KEYS = ['rawDataPackageId', 'dataTransferPackageId'] as const;

/**
 * Builds one joined-table subtype: the shared key `operation_id`, a foreign key to the base row, and
 * a `kind` column that defaults to the subtype's own kind and is checked against it. A statement
 * trigger (`opstate_kind_matches_operation`, migration 0021) compares that kind with the base
 * row's, and the base row's kind never changes (`opstate_operation_kind_fixed`): a subtype row under
 * a base row of another kind is rejected by the database (23503), whatever the code does. (A
 * composite foreign key to the base's `(id, kind)` said the same at the price of a second unique
 * index on the base, written again at every status change.) Every reference column (`REFERENCES`) gets a foreign
 * key with a short explicit name (drizzle's default names pass Postgres' 63-character limit), and
 * the artifact column an index.
 */
function subtype<const N extends string, C extends Record<string, PgColumnBuilderBase>>(
  name: N,
  kind: OperationKind,
  columns: C,
) {
  const artifactKey = ARTIFACT_KEYS.find((k) => k in columns);
  if (artifactKey === undefined) throw new Error(`subtype ${name} names no artifact column`);
  return pgTable(
    name,
    {
      operationId: uuid('operation_id').primaryKey(),
      kind: text('kind').notNull().default(kind),
      ...columns,
    },
    (t) => {
      const column = (key: string) =>
        (t as unknown as Record<string, AnyPgColumn>)[key] as AnyPgColumn;
      return [
        check(`${name}_kind_check`, sql`${t.kind} = '${sql.raw(kind)}'`),
        foreignKey({
          name: `${name}_base_fk`,
          columns: [t.operationId],
          foreignColumns: [operation.id],
        }).onDelete('cascade'),
        index(`${name}_artifact_idx`).on(column(artifactKey)),
        ...Object.keys(columns)
          .filter((key) => key in REFERENCES)
          .map((key) =>
            foreignKey({
              name: `${name}_${column(key).name}_fk`,
              columns: [column(key)],
              foreignColumns: [REFERENCES[key] as AnyPgColumn],
            }),
          ),
      ];
    },
  );
}

/** Packaging: raw data files at a location become the raw data package. */
export const packagingOperation = subtype('packaging_operation', OperationKind.RAW_DATA_PACKAGE, {
  rawDataPackageId: uuid('raw_data_package_id').notNull(),
  locationId: uuid('location_id').notNull(),
});

/** Bundling: raw data packages at a location become the data transfer package. */
export const bundlingOperation = subtype(
  'bundling_operation',
  OperationKind.DATA_TRANSFER_PACKAGE,
  {
    dataTransferPackageId: uuid('data_transfer_package_id').notNull(),
    locationId: uuid('location_id').notNull(),
  },
);

/** Transfer: a data transfer package from one location to another. */
export const transferOperation = subtype('transfer_operation', OperationKind.TRANSFER, {
  dataTransferPackageId: uuid('data_transfer_package_id').notNull(),
  sourceLocationId: uuid('source_location_id').notNull(),
  destinationLocationId: uuid('destination_location_id').notNull(),
});

/** Unpack: a transferred data transfer package back into its raw data packages (fan-out). */
export const unpackOperation = subtype('unpack_operation', OperationKind.UNPACK, {
  dataTransferPackageId: uuid('data_transfer_package_id').notNull(),
  locationId: uuid('location_id').notNull(),
});

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
);

/** Staging: a raw data package brought to a processing location (download + unpack). */
export const stagingOperation = subtype('staging_operation', OperationKind.STAGING, {
  rawDataPackageId: uuid('raw_data_package_id').notNull(),
  sourceLocationId: uuid('source_location_id').notNull(),
  destinationLocationId: uuid('destination_location_id').notNull(),
});

/** The subtype table of each kind, each under its own type (`OperationFields` derives from them). */
export interface SubtypeTables {
  readonly [OperationKind.RAW_DATA_PACKAGE]: typeof packagingOperation;
  readonly [OperationKind.DATA_TRANSFER_PACKAGE]: typeof bundlingOperation;
  readonly [OperationKind.TRANSFER]: typeof transferOperation;
  readonly [OperationKind.UNPACK]: typeof unpackOperation;
  readonly [OperationKind.LONG_TERM_ARCHIVE]: typeof longTermArchiveOperation;
  readonly [OperationKind.STAGING]: typeof stagingOperation;
}

/** The subtype table of each kind: exhaustive, so a new kind without a table fails to compile. */
export const SUBTYPE_TABLE: SubtypeTables & Readonly<Record<OperationKind, unknown>> =
  Object.freeze({
    [OperationKind.RAW_DATA_PACKAGE]: packagingOperation,
    [OperationKind.DATA_TRANSFER_PACKAGE]: bundlingOperation,
    [OperationKind.TRANSFER]: transferOperation,
    [OperationKind.UNPACK]: unpackOperation,
    [OperationKind.LONG_TERM_ARCHIVE]: longTermArchiveOperation,
    [OperationKind.STAGING]: stagingOperation,
  });
