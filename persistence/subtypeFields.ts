import { getTableColumns, getTableName } from 'drizzle-orm';
import { z } from 'zod';
import { OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { SUBTYPE_TABLE } from './schema/operationSubtypes.ts';

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
  /** Validates a caller's `fields` object for this kind (unknown keys are refused). */
  readonly schema: z.ZodType<Record<string, string | null | undefined>>;
  /**
   * The field naming the location the operation acts on — `destinationLocationId` when the
   * subtype has one, else `locationId` — which, with the kind, a circuit breaker guards.
   */
  readonly targetLocationKey: string;
}

const SHARED = new Set(['operationId', 'kind']);

/** A uuid as Postgres accepts it in its canonical form (any version). */
export const uuidSchema = z.guid({
  error: 'must be a uuid like 0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f',
});

/**
 * The same test as `uuidSchema` (its very pattern), without building a parse result: ids are
 * checked on every load, START and completion.
 */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && z.regexes.guid.test(value);
}

function specOf(kind: OperationKind): SubtypeSpec {
  const table = SUBTYPE_TABLE[kind];
  const fields: SubtypeField[] = [];
  const shape: Record<string, z.ZodType> = {};
  for (const [key, column] of Object.entries(getTableColumns(table))) {
    if (SHARED.has(key)) continue;
    const type = column.columnType === 'PgUUID' ? 'uuid' : 'text';
    const base = type === 'uuid' ? uuidSchema : z.string().min(1);
    fields.push({ key, column: column.name, type, required: column.notNull });
    shape[key] = column.notNull ? base : base.nullish();
  }
  const target = ['destinationLocationId', 'locationId'].find((key) =>
    fields.some((f) => f.key === key && f.required),
  );
  if (target === undefined) {
    throw new Error(`subtype ${getTableName(table)} names no required target location column`);
  }
  return {
    table: getTableName(table),
    fields,
    targetLocationKey: target,
    schema: z.strictObject(shape) as unknown as SubtypeSpec['schema'],
  };
}

/** Per kind: the subtype table, its fields and their validator. */
export const SUBTYPE_SPEC: Readonly<Record<OperationKind, SubtypeSpec>> = Object.freeze(
  Object.fromEntries(OPERATION_KINDS.map((k) => [k, specOf(k)])) as Record<
    OperationKind,
    SubtypeSpec
  >,
);
