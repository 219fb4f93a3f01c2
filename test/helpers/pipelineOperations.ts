import { sql } from 'drizzle-orm';

/** An operation as a pipeline drill checks it: its `kind|subject|target location` key. */
export interface KeyedOperation {
  readonly id: string;
  readonly kind: string;
  readonly status: string;
  readonly key: string;
}

/**
 * Every operation as `kind|subject|target location`, the subject from its subtype row: a
 * pipeline creates each key once, which a drill checks after its faults.
 *
 * @example
 * ```ts
 * const ops = await operationKeys(runtime.database);
 * expect(new Set(ops.map((o) => o.key)).size).toBe(ops.length);
 * ```
 */
export async function operationKeys(database: {
  execute: (q: ReturnType<typeof sql>) => Promise<Record<string, unknown>[]>;
}): Promise<KeyedOperation[]> {
  const rows = await database.execute(sql`
    select o.id::text as id, o.kind, o.status, o.target_location_id::text as location,
      coalesce(r.raw_data_package_id, d.data_transfer_package_id, t.data_transfer_package_id,
               u.data_transfer_package_id, a.raw_data_package_id)::text as subject
    from operation o
    left join packaging_operation r on r.operation_id = o.id
    left join bundling_operation d on d.operation_id = o.id
    left join transfer_operation t on t.operation_id = o.id
    left join unpack_operation u on u.operation_id = o.id
    left join long_term_archive_operation a on a.operation_id = o.id`);
  return rows.map((r) => ({
    id: String(r.id),
    kind: String(r.kind),
    status: String(r.status),
    key: `${String(r.kind)}|${String(r.subject)}|${String(r.location)}`,
  }));
}
