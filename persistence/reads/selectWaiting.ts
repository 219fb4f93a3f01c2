import { sql } from 'drizzle-orm';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import type { Executor } from '../openDatabase.ts';

/**
 * PENDING operations per kind that wait for a time still ahead (`not_before` after `now`): a
 * delayed start, or a retry's backoff. The scheduler leaves them alone until then, so they are
 * waiting, not stuck. One range of `operation_due_idx`, whatever the backlog.
 */
export async function selectWaiting(
  exec: Executor,
  now: Date,
): Promise<Record<OperationKind, number>> {
  const rows = await exec.execute(sql`
    select kind, count(*)::int as n from operation
    where status = 'PENDING' and not_before > ${now.toISOString()}::timestamptz
    group by kind`);
  const waiting = Object.fromEntries(OPERATION_KINDS.map((k) => [k, 0])) as Record<
    OperationKind,
    number
  >;
  for (const r of rows) waiting[r.kind as OperationKind] = Number(r.n);
  return waiting;
}
