import { type SQL, sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Executor } from './openDatabase.ts';

/**
 * The proof a control-plane write carries that its process still leads: the lease's name and the
 * epoch it was granted. A write fenced with it applies only while that epoch holds an unexpired
 * lease, judged by the database's clock in the same statement.
 */
export interface LeaseFence {
  readonly name: string;
  readonly epoch: number;
  /**
   * The holder the epoch was granted to, checked too when given (leadership always gives it): an
   * epoch is granted once per database, but a failover to an asynchronous standby can lose a grant
   * the old primary acknowledged, and the promoted server then grants the same epoch to another
   * holder; without the holder both would pass the fence.
   */
  readonly holder?: string;
}

/** The SQL condition on a `control_plane_lease` row aliased `l` that it is `fence`'s. */
export function leaseRowOf(fence: LeaseFence): SQL {
  const holder = fence.holder === undefined ? sql`` : sql` and l.holder = ${fence.holder}`;
  return sql`l.name = ${fence.name} and l.epoch = ${fence.epoch}${holder}`;
}

/**
 * The SQL condition of a fence (`true` without one), for a `where` clause.
 *
 * @example
 * ```ts
 * sql`update operation set … where id = ${id} and ${leaseHolds(fence)}`;
 * ```
 */
export function leaseHolds(fence: LeaseFence | undefined): SQL {
  if (fence === undefined) return sql`true`;
  return sql`exists (select 1 from control_plane_lease l where ${leaseRowOf(fence)}
    and l.expires_at > now())`;
}

/** Whether `fence` still holds an unexpired lease (one read, the database's clock). */
export async function fenceHolds(exec: Executor, fence: LeaseFence): Promise<boolean> {
  const [row] = await exec.execute(sql`select ${leaseHolds(fence)} as ok`);
  return row?.ok === true;
}

/** `NOT_LEADER`: a write made under `fence` after its lease was lost. */
export function notLeader(fence: LeaseFence): OpstateError {
  return new OpstateError(
    OpstateErrorCode.NOT_LEADER,
    `control-plane write refused: leadership epoch ${fence.epoch} of '${fence.name}' no longer holds the lease (another replica took over); this process stops its loops and contends again`,
    { details: { ...fence } },
  );
}
