import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { ActiveOperation, ActivePage, InProgressOperation } from '../ActiveOperation.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';
import type { TallyDrift } from '../StatusCounts.ts';

/** Every IN_PROGRESS operation (the partial index keeps this O(active)). */
export async function selectInProgress(exec: Executor): Promise<InProgressOperation[]> {
  const rows = await exec.execute(sql`
    select id, kind, attempt, started_at, worker_id from operation
    where status = 'IN_PROGRESS' order by started_at nulls first`);
  return rows.map((r) => ({
    id: String(r.id),
    kind: r.kind as OperationKind,
    attempt: Number(r.attempt),
    startedAt: toDate(r.started_at),
    workerId: r.worker_id == null ? null : String(r.worker_id),
  }));
}

/**
 * SCHEDULED / IN_PROGRESS operations (or those of one `status`) whose current phase began before
 * `before`, oldest first, at most `limit`, after `after` (the `position` of the last row of the
 * page before): the keyset is (since, id), so a page boundary neither skips nor repeats a row.
 */
export async function selectActiveOlderThan(
  exec: Executor,
  before: Date,
  limit: number,
  options: ActivePage = {},
): Promise<ActiveOperation[]> {
  const statuses = options.status === undefined ? ['SCHEDULED', 'IN_PROGRESS'] : [options.status];
  const after =
    options.after === undefined
      ? sql``
      : sql`and (since, id) > (${options.after.since}::timestamptz, ${options.after.id}::uuid)`;
  const rows = await exec.execute(sql`
    select id, kind, status, attempt, scheduled_at, started_at, worker_id, since,
      since::text as since_exact
    from (
      select id, kind, status, attempt, scheduled_at, started_at, worker_id,
        coalesce(case when status = 'IN_PROGRESS' then started_at else scheduled_at end, created_at)
          as since
      from operation
      where status in (${sql.join(
        statuses.map((s) => sql`${s}`),
        sql`, `,
      )})
    ) active
    where since < ${before.toISOString()}::timestamptz ${after}
    order by since, id
    limit ${limit}`);
  return rows.map((r) => ({
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    attempt: Number(r.attempt),
    scheduledAt: toDate(r.scheduled_at),
    startedAt: toDate(r.started_at),
    since: toDate(r.since) as Date,
    workerId: r.worker_id == null ? null : String(r.worker_id),
    position: { since: String(r.since_exact), id: String(r.id) },
  }));
}

/**
 * Folds `operation_tally` into one row per kind and status (the database function does it in one
 * statement; rows of writes not yet committed are left for the next fold). Safe from any process
 * at any time: the sums do not change. Returns how many rows it folded.
 */
export async function foldStatusTally(exec: Executor): Promise<number> {
  const [row] = await exec.execute(sql`select opstate_fold_operation_tally() as n`);
  return Number(row?.n ?? 0);
}

/** A drift row as Postgres returns it (bigint sums come back as strings). */
export type TallyDriftRow = { kind: string; status: string; tallied: unknown; stored: unknown };

export const toTallyDrift = (r: TallyDriftRow): TallyDrift => ({
  kind: String(r.kind),
  status: String(r.status),
  tallied: Number(r.tallied),
  stored: Number(r.stored),
});

/**
 * Re-bases the tally the counts are summed from on a count of the rows and returns the kinds and
 * statuses that were wrong, none when the tally matched. For a tally something bypassed: a write
 * to `operation` with its triggers off. The database function counts and replaces in one snapshot,
 * so writers go on meanwhile; it and the fold exclude each other. Call it in autocommit or a READ
 * COMMITTED transaction, where its snapshot is taken after that exclusion; in a REPEATABLE READ
 * transaction whose snapshot predates a fold it fails with a serialization error and changes
 * nothing.
 */
export async function recountStatusTally(exec: Executor): Promise<TallyDrift[]> {
  const rows = await exec.execute<TallyDriftRow>(
    sql`select kind, status, tallied, stored from opstate_recount_operation_tally()`,
  );
  return rows.map(toTallyDrift);
}

/**
 * How many operations are SCHEDULED now, summed from `operation_tally` (exact in the statement's
 * snapshot, as a count of the rows would be). Not a count of the rows: the scheduler asks before
 * every pass, and the entries every operation leaves in the partial index of live operations stay
 * there until a vacuum removes them, so counting the rows visited every operation that had passed
 * through SCHEDULED since the last vacuum (tens of thousands of entries and the heap page behind
 * each) where a handful of tally rows hold the same number.
 */
export async function selectScheduledCount(exec: Executor): Promise<number> {
  const [row] = await exec.execute(
    sql`select coalesce(sum(n), 0)::int as n from operation_tally where status = 'SCHEDULED'`,
  );
  return Number(row?.n ?? 0);
}
