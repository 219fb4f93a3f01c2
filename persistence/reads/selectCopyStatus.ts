import { sql } from 'drizzle-orm';
import {
  PHYSICAL_COPY_STATUSES,
  type PhysicalCopyStatus,
} from '../../machines/physicalCopyMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';

/** Copies per location type × status (every status present), and the deletions that need eyes. */
export interface CopyStatusSummary {
  readonly copies: Record<string, Record<PhysicalCopyStatus, number>>;
  /** Deletions running now or waiting for a takeover. */
  readonly inProgress: readonly {
    readonly copyId: string;
    readonly holder: string;
    readonly epoch: number;
    readonly leaseUntil: Date;
    readonly leaseExpired: boolean;
    readonly done: number;
    readonly members: number;
    readonly failures: number;
  }[];
  /** Deletions that kept members or were interrupted too often, for an operator. */
  readonly failed: readonly {
    readonly copyId: string;
    readonly failures: number;
    readonly lastError: string | null;
    readonly archiveOperationId: string | null;
  }[];
}

/**
 * Counts copies per location type and status (live and deleted) and lists the deletions in
 * progress (holder, lease, progress) and the failed ones (with the archive operation to inspect).
 *
 * @example
 * ```ts
 * const { copies, failed } = await selectCopyStatus(database);
 * ```
 */
export async function selectCopyStatus(exec: Executor): Promise<CopyStatusSummary> {
  const counts = await exec.execute(sql`
    select l.location_type, c.status, count(*)::int as n from physical_copy c
    join data_location l on l.id = c.location_id group by 1, 2`);
  const copies: Record<string, Record<PhysicalCopyStatus, number>> = {};
  for (const r of counts) {
    const type = String(r.location_type);
    copies[type] ??= Object.fromEntries(PHYSICAL_COPY_STATUSES.map((s) => [s, 0])) as Record<
      PhysicalCopyStatus,
      number
    >;
    (copies[type] as Record<string, number>)[String(r.status)] = Number(r.n);
  }
  const running = await exec.execute(sql`
    select c.id, c.deletion_failure_count, d.holder, d.epoch, d.lease_until, d.lease_until < now() as expired,
      (select count(*) from copy_deletion_member m where m.deletion_id = d.id)::int as members,
      (select count(*) from copy_deletion_outcome x where x.deletion_id = d.id)::int as done
    from physical_copy c
    join lateral (select * from copy_deletion x where x.physical_copy_id = c.id order by x.plan desc limit 1) d on true
    where c.status = 'DELETION_IN_PROGRESS' order by d.lease_until limit 50`);
  const failed = await exec.execute(sql`
    select c.id, c.deletion_failure_count, c.last_error,
      (select d.archive_operation_id from copy_deletion d where d.physical_copy_id = c.id
        order by d.plan desc limit 1) as archive_operation_id
    from physical_copy c where c.status = 'DELETION_FAILED' order by c.updated_at desc limit 50`);
  return {
    copies,
    inProgress: running.map((r) => ({
      copyId: String(r.id),
      holder: String(r.holder),
      epoch: Number(r.epoch),
      leaseUntil: toDate(r.lease_until) as Date,
      leaseExpired: r.expired === true,
      done: Number(r.done),
      members: Number(r.members),
      failures: Number(r.deletion_failure_count),
    })),
    failed: failed.map((r) => ({
      copyId: String(r.id),
      failures: Number(r.deletion_failure_count),
      lastError: r.last_error == null ? null : String(r.last_error),
      archiveOperationId: r.archive_operation_id == null ? null : String(r.archive_operation_id),
    })),
  };
}
