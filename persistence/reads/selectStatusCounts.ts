import { sql } from 'drizzle-orm';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../../machines/operationMachine.ts';
import type { Executor } from '../openDatabase.ts';
import type { StatusCounts, TallyDrift } from '../StatusCounts.ts';
import { type TallyDriftRow, toTallyDrift } from '../sql/controlPlaneQueries.ts';

/**
 * Counts per kind × status, with every kind and status present (zeros included). They are the
 * sums of `operation_tally`, which the database keeps in step with every write to `operation`:
 * exact in the snapshot read, at a cost that follows the rows not yet folded (a few per write
 * statement since the last fold), not the operations stored.
 *
 * @example
 * ```ts
 * (await selectStatusCounts(database)).transfer.FAILED; // 3
 * ```
 */
export async function selectStatusCounts(exec: Executor): Promise<StatusCounts> {
  const rows = await exec.execute<{ kind: string; status: string; n: number }>(sql`
    select kind, status, sum(n)::bigint as n from operation_tally group by kind, status`);
  const counts = Object.fromEntries(
    OPERATION_KINDS.map((k) => [k, Object.fromEntries(OPERATION_STATUSES.map((s) => [s, 0]))]),
  ) as StatusCounts;
  for (const r of rows) {
    const byStatus = counts[r.kind as OperationKind];
    if (byStatus !== undefined && r.status in byStatus) {
      byStatus[r.status as OperationStatus] = Number(r.n);
    }
  }
  return counts;
}

/**
 * The live kinds and statuses (SCHEDULED, IN_PROGRESS) whose count in the tally differs from the
 * rows, none while the tally is right: the check `opstate status` runs for drift that only
 * `opstate recount` repairs. One statement, so both sides are read in one snapshot and a write
 * racing it cannot look like drift. It counts the live rows through their partial index, whose
 * cost grows with the entries finished work leaves there until a vacuum: fine for an operator's
 * command, not for a loop.
 *
 * @example
 * ```ts
 * const drift = await selectLiveTallyDrift(database); // [] while the counts are right
 * ```
 */
export async function selectLiveTallyDrift(exec: Executor): Promise<TallyDrift[]> {
  const rows = await exec.execute<TallyDriftRow>(sql`
    with stored as (
      select kind, status, count(*)::bigint as n from operation
      where status in ('SCHEDULED', 'IN_PROGRESS') group by kind, status
    ), tallied as (
      select kind, status, sum(n)::bigint as n from operation_tally
      where status in ('SCHEDULED', 'IN_PROGRESS') group by kind, status
    )
    select coalesce(s.kind, t.kind) as kind, coalesce(s.status, t.status) as status,
      coalesce(t.n, 0) as tallied, coalesce(s.n, 0) as stored
    from stored s full join tallied t on t.kind = s.kind and t.status = s.status
    where coalesce(t.n, 0) <> coalesce(s.n, 0)
    order by 1, 2`);
  return rows.map(toTallyDrift);
}
