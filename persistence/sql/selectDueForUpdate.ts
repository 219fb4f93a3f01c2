import { sql } from 'drizzle-orm';
import { OPERATION_COLUMNS, type OperationRecord, toOperationRecord } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';

/**
 * Locks up to `limit` due PENDING operations (not_before null or passed), oldest due first,
 * skipping rows another claimer holds: two claimers running at once never get the same row.
 * Must run inside a transaction, which holds the locks until the claim is written.
 */
export async function selectDueForUpdate(
  tx: Executor,
  now: Date,
  limit: number,
): Promise<OperationRecord[]> {
  const rows = await tx.execute(sql`
    select ${sql.raw(OPERATION_COLUMNS)} from operation o
    where o.status = 'PENDING' and (o.not_before is null or o.not_before <= ${now.toISOString()}::timestamptz)
    order by o.not_before asc nulls first, o.created_at
    limit ${limit}
    for update skip locked`);
  return rows.map(toOperationRecord);
}
