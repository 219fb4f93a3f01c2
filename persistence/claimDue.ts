import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError } from '../machines/OpstateError.ts';
import type { Route } from '../machines/routing.ts';
import { fenceHolds, type LeaseFence, notLeader } from './LeaseFence.ts';
import type { OutboxPayload } from './OutboxEntry.ts';
import type { Database } from './openDatabase.ts';
import { planTransition, type TransitionWrite } from './planTransition.ts';
import { selectDueForUpdate } from './sql/selectDueForUpdate.ts';
import { writeTransitions } from './sql/writeTransitions.ts';

/** A due operation moved to SCHEDULED, with the dispatch its SCHEDULE transition records. */
export interface ClaimedOperation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly route: Route;
  readonly attempt: number;
  readonly version: number;
  readonly payload: OutboxPayload;
}

/** How a claim orders what is due. */
export interface ClaimOptions {
  /**
   * An operation due for this long or longer is claimed as if at the highest priority (default
   * `DEFAULT_STARVATION_AGE_MS`, 15 minutes; the control plane passes its `starvationAgeMs`).
   */
  readonly starvationAgeMs?: number;
}

export interface ClaimResult {
  readonly claimed: ClaimedOperation[];
  /** Due rows the machine refused (a damaged or unknown-version snapshot): left untouched. */
  readonly refused: { id: string; error: OpstateError }[];
  /** Due rows a flow limit held back (they stay PENDING): the next pass may find more room. */
  readonly heldBack: number;
}

/**
 * The scheduler's batch: in one short transaction, locks up to `limit` due PENDING operations
 * (highest priority first, FIFO within one, the long-waiting first of all) with
 * `FOR UPDATE SKIP LOCKED`, runs SCHEDULE through the machine for each in memory, and writes all
 * of them — base rows and transition rows — in one multi-row statement. Five round
 * trips (begin, a planner setting, select, write, commit) per batch, whatever its size. Two claimers running at once
 * never claim the same row, and never together start more than a flow limit allows. With a `fence`, a claim made after that leadership epoch lost its
 * lease writes nothing and throws `NOT_LEADER`.
 */
export async function claimDue(
  database: Database,
  limit: number,
  now: Date,
  fence?: LeaseFence,
  starvationAgeMs?: number,
): Promise<ClaimResult> {
  return database.transaction(async (tx) => {
    const { due, heldBack } = await selectDueForUpdate(tx, now, limit, starvationAgeMs);
    const writes: TransitionWrite[] = [];
    const refused: ClaimResult['refused'] = [];
    const byId = new Map<string, { write: TransitionWrite; kind: OperationKind; route: Route }>();
    for (const record of due) {
      try {
        const { write } = planTransition(record, { type: 'SCHEDULE' }, now);
        writes.push(write);
        byId.set(record.id, { write, kind: record.kind, route: record.route });
      } catch (err) {
        if (!(err instanceof OpstateError)) throw err;
        refused.push({ id: record.id, error: err });
      }
    }
    const written = await writeTransitions(tx, writes, fence);
    if (fence !== undefined && written.length < writes.length && !(await fenceHolds(tx, fence))) {
      throw notLeader(fence);
    }
    // In claim order (the order of `due`), whatever order the write returned its rows in.
    const writtenById = new Map(written.map((w) => [w.id, w]));
    const claimed = writes.flatMap((planned): ClaimedOperation[] => {
      const w = writtenById.get(planned.id);
      if (w === undefined) return [];
      const p = byId.get(w.id) as { write: TransitionWrite; kind: OperationKind; route: Route };
      return [
        {
          id: w.id,
          kind: p.kind,
          route: p.route,
          attempt: p.write.attempt,
          version: w.version,
          payload: p.write.ob_payload as OutboxPayload,
        },
      ];
    });
    return { claimed, refused, heldBack };
  });
}
