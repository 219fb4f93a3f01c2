/**
 * The JSON text of rows for `jsonb_to_recordset`, smaller to build, send and parse: a top-level
 * null is left out (the recordset reads a missing key as NULL, as it reads a JSON null in a
 * column that is not jsonb, and every jsonb column these rows fill treats the two alike), and with
 * `columns` only those keys are written. Nested values (a snapshot) are written whole.
 *
 * @example
 * ```ts
 * sql`select * from jsonb_to_recordset(${recordsetJson(writes, ['id', 'status'])}::jsonb) as i(id uuid, status text)`;
 * ```
 */
export function recordsetJson<T extends object>(
  rows: readonly T[],
  columns?: readonly (keyof T & string)[],
): string {
  const out = new Array<Record<string, unknown>>(rows.length);
  for (let n = 0; n < rows.length; n++) {
    const row = rows[n] as Record<string, unknown>;
    const o: Record<string, unknown> = {};
    for (const k of columns ?? Object.keys(row)) {
      const v = row[k];
      if (v !== null && v !== undefined) o[k] = v;
    }
    out[n] = o;
  }
  return JSON.stringify(out);
}
