import { sql } from 'drizzle-orm';
import { OPERATION_COLUMNS, type OperationRecord, toOperationRecord } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';

/**
 * A Postgres array literal of already-validated uuids, passed as one text parameter and cast with
 * `::uuid[]`. One parameter keeps the statement text (and its prepared plan) the same for any
 * batch size.
 */
export function uuidArray(ids: readonly string[]): string {
  return `{${ids.join(',')}}`;
}

/** Loads base rows by id, in one statement; ids that do not exist are absent. */
export async function selectOperations(
  exec: Executor,
  ids: readonly string[],
): Promise<Map<string, OperationRecord>> {
  if (ids.length === 0) return new Map();
  const rows = await exec.execute(
    sql`select ${sql.raw(OPERATION_COLUMNS)} from operation o where o.id = any(${uuidArray(ids)}::uuid[])`,
  );
  return new Map(rows.map((r) => [String(r.id), toOperationRecord(r)]));
}

/** The current version of each id that exists (for reporting a lost compare-and-set). */
export async function selectVersions(
  exec: Executor,
  ids: readonly string[],
): Promise<Map<string, { version: number; status: string; attempt: number }>> {
  if (ids.length === 0) return new Map();
  const rows = await exec.execute<{ id: string; version: number; status: string; attempt: number }>(
    sql`select id, version, status, attempt from operation where id = any(${uuidArray(ids)}::uuid[])`,
  );
  return new Map(
    rows.map((r) => [
      String(r.id),
      { version: Number(r.version), status: String(r.status), attempt: Number(r.attempt) },
    ]),
  );
}
