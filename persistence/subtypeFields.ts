import { getTableColumns, getTableName, type InferInsertModel } from 'drizzle-orm';
import { z } from 'zod';
import { OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { ROUTED_LOCATION_FIELD } from '../machines/routing.ts';
import type { OperationFields } from './publicRecords.ts';
import { SUBTYPE_TABLE, type SubtypeTables } from './schema/operationSubtypes.ts';

export type { OperationFields } from './publicRecords.ts';

/** The fields of a kind as its drizzle subtype table says them. */
type TableFields<K extends OperationKind> = SubtypeColumns<InferInsertModel<SubtypeTables[K]>>;

/** True when A and B are the same type, both ways (not merely assignable one way). */
type Same<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/**
 * The written-out fields of every kind equal its table's: a column added, renamed, dropped or
 * made optional without the same change to `OperationFieldsByKind` does not compile.
 */
export const FIELDS_MATCH_TABLES: {
  readonly [K in OperationKind]: Same<OperationFields<K>, TableFields<K>>;
} = {
  raw_data_package: true,
  data_transfer_package: true,
  transfer: true,
  unpack: true,
  long_term_archive: true,
  staging: true,
};

/**
 * A subtype row's insert model without the shared `operationId` and `kind`, flattened so that an
 * editor and a compiler error show the fields. (A key-remapping mapped type, not `Omit`: `Omit`
 * over drizzle's model of a generic kind drops the optional keys.)
 */
type SubtypeColumns<M> = {
  readonly [P in keyof M as P extends 'operationId' | 'kind' ? never : P]: M[P];
} & {};

/** One stage-specific field of a subtype, read from the drizzle table so the two never drift. */
export interface SubtypeField {
  /** The camelCase key callers use (`rawDataPackageId`). */
  readonly key: string;
  /** The column (`raw_data_package_id`). */
  readonly column: string;
  readonly type: 'uuid' | 'text';
  readonly required: boolean;
}

export interface SubtypeSpec {
  readonly table: string;
  readonly fields: readonly SubtypeField[];
  /** The fields by key, for validation. */
  readonly byKey: ReadonlyMap<string, SubtypeField>;
  /**
   * The field naming the location the operation acts on (`ROUTED_LOCATION_FIELD`: the one whose
   * storage its handler must reach): its queue is that location's, and with the kind it is the
   * pair a circuit breaker guards.
   */
  readonly targetLocationKey: string;
}

const SHARED = new Set(['operationId', 'kind']);

/** A uuid for messages: what one looks like. */
export const UUID_EXAMPLE = '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f';

/**
 * A uuid as Postgres accepts it in its canonical form (any version): ids are checked on every
 * create, load, START and completion.
 *
 * @example
 * ```ts
 * isUuid('0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f'); // true
 * ```
 */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && z.regexes.guid.test(value);
}

function specOf(kind: OperationKind): SubtypeSpec {
  const table = SUBTYPE_TABLE[kind];
  const fields: SubtypeField[] = [];
  for (const [key, column] of Object.entries(getTableColumns(table))) {
    if (SHARED.has(key)) continue;
    const type = column.columnType === 'PgUUID' ? 'uuid' : 'text';
    fields.push({ key, column: column.name, type, required: column.notNull });
  }
  const target = ROUTED_LOCATION_FIELD[kind];
  if (!fields.some((f) => f.key === target && f.required)) {
    throw new Error(`subtype ${getTableName(table)} has no required ${target} to route on`);
  }
  return {
    table: getTableName(table),
    fields,
    byKey: new Map(fields.map((f) => [f.key, f])),
    targetLocationKey: target,
  };
}

/** Per kind: the subtype table and its fields. */
export const SUBTYPE_SPEC: Readonly<Record<OperationKind, SubtypeSpec>> = Object.freeze(
  Object.fromEntries(OPERATION_KINDS.map((k) => [k, specOf(k)])) as Record<
    OperationKind,
    SubtypeSpec
  >,
);
