import { type SQL, sql } from 'drizzle-orm';
import type { Deadlines } from '../../machines/deadlines.ts';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { RunningAttempt } from '../ActiveOperation.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';

/**
 * Row `o` is IN_PROGRESS and has run at least `share` of its deadline (the operation's own, else
 * its kind's in `deadlines`) by `now`, counted from its START. Off the live index (status,
 * started_at), so it reads the running attempts only.
 */
export function runPastShareOfDeadline(now: Date, deadlines: Deadlines, share: number): SQL {
  return sql`o.status = 'IN_PROGRESS' and o.started_at is not null
    and o.started_at <= ${now.toISOString()}::timestamptz
      - coalesce(o.deadline_ms, (${JSON.stringify(deadlines)}::jsonb ->> o.kind)::int)
        * ${share}::float8 * interval '1 millisecond'`;
}

/** A selected row as the deadline path takes it. */
export function toRunningAttempt(r: Row): RunningAttempt {
  return {
    id: String(r.id),
    kind: r.kind as OperationKind,
    attempt: Number(r.attempt),
    startedAt: toDate(r.started_at) as Date,
    workerId: r.worker_id == null ? null : String(r.worker_id),
    deadlineMs: r.deadline_ms == null ? null : Number(r.deadline_ms),
  };
}

/**
 * IN_PROGRESS attempts past their deadline at `now`, the longest past first: what the deadline
 * path resets, whatever their heartbeats say.
 */
export async function selectPastDeadline(
  exec: Executor,
  now: Date,
  deadlines: Deadlines,
  limit: number,
): Promise<RunningAttempt[]> {
  const rows = await exec.execute(sql`
    select o.id, o.kind, o.attempt, o.started_at, o.worker_id, o.deadline_ms from operation o
    where ${runPastShareOfDeadline(now, deadlines, 1)}
    order by o.started_at, o.id limit ${limit}`);
  return rows.map(toRunningAttempt);
}
