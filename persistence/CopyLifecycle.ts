import { sql } from 'drizzle-orm';
import { type CopyCommand, type CopyDecision, decideCopy } from '../machines/decideCopy.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import { checkId } from './applyEvents.ts';
import type { DeletionPlanInsert } from './DeletionPlan.ts';
import { toDate } from './OperationRecord.ts';
import type { Database } from './openDatabase.ts';
import { type CopyFactsRow, copyFactsCtes, toCopyFactsRow } from './sql/copyFacts.ts';
import { type CopyWrite, writeCopyTransition } from './sql/writeCopyTransition.ts';

/** Who changed a copy and why, plus what rides along with the change. */
export interface CopyTransitionOptions {
  /** A deleter id or `operator`. */
  readonly by: string;
  readonly reason?: string;
  /** Only the holder of this lease epoch may make the change (a deleter's own steps). */
  readonly fence?: CopyWrite['fence'];
  /** START_DELETION: the deletion plan, written in the same statement. */
  readonly plan?: DeletionPlanInsert;
  /** RESUME_DELETION: the lease to take over. */
  readonly takeover?: CopyWrite['takeover'];
  /** An archive record row written with the change. */
  readonly record?: CopyWrite['record'];
}

/** A copy status change that was written. */
export interface AppliedCopyTransition extends CopyDecision {
  readonly copyId: string;
  readonly version: number;
  /** The lease epoch taken (START_DELETION, RESUME_DELETION), else null. */
  readonly epoch: number | null;
  /** The facts the change was decided on. */
  readonly decidedOn: CopyFactsRow;
}

/** One row of a copy's append-only status history. */
export interface CopyTransitionEntry {
  readonly from: PhysicalCopyStatus;
  readonly to: PhysicalCopyStatus;
  readonly event: string;
  readonly version: number;
  readonly by: string;
  readonly reason: string | null;
  readonly at: Date;
}

const ROUNDS = 4;

function notFound(copyId: string): OpstateError {
  return new OpstateError(OpstateErrorCode.NOT_FOUND, `no physical copy with id ${copyId}`, {
    details: { copyId },
  });
}

/**
 * The only way a physical copy's status changes. Each change reads the copy's facts (a verified
 * archive copy of the same artifact and digest at a long-term-archive location, the active
 * retention claims, the current deletion's lease and receipt), lets the pure `physicalCopyMachine`
 * decide (`decideCopy`), and writes the decision in one statement that re-reads the same facts in
 * its own snapshot and lands only with a compare-and-set on the copy's `version` — so a claim, a
 * failed re-verification or another deleter that got in between makes it decide again instead of
 * writing a stale decision. A refused change raises `UNSAFE` (with the reason), `INVALID_EVENT` or
 * `CONFLICT`, and writes nothing. Every change appends a history row.
 *
 * @example
 * ```ts
 * const copies = new CopyLifecycle(database);
 * await copies.apply(copyId, { type: 'SCHEDULE_DELETION' }, { by: 'operator', reason: 'archived' });
 * // OpstateError UNSAFE: "SCHEDULE_DELETION refused: no verified archive copy …" for the only copy
 * ```
 */
export class CopyLifecycle {
  constructor(private readonly database: Database) {}

  /**
   * The copy's state and every fact a decision would use, read in one snapshot.
   *
   * @example
   * ```ts
   * const { state, facts } = await copies.facts(copyId);
   * if (!facts.verifiedArchive) console.log(facts.archiveProblem);
   * ```
   */
  async facts(copyId: string): Promise<CopyFactsRow> {
    const id = checkId(copyId, 'physical copy id');
    const [row] = await this.database.execute(
      sql`with ${copyFactsCtes(sql`${id}::uuid`)} select * from f`,
    );
    if (row === undefined) throw notFound(id);
    return toCopyFactsRow(row);
  }

  /**
   * Applies one command through the machine and writes it (see the class). Retries a lost
   * compare-and-set a few times, deciding again on the facts the losing write read.
   *
   * @example
   * ```ts
   * await copies.apply(copyId, { type: 'REPLAN_DELETION' }, { by: 'operator', reason: 'reviewed' });
   * ```
   */
  async apply(
    copyId: string,
    command: CopyCommand,
    options: CopyTransitionOptions,
  ): Promise<AppliedCopyTransition> {
    const id = checkId(copyId, 'physical copy id');
    if (typeof options.by !== 'string' || options.by === '') {
      throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'a copy change needs `by`');
    }
    let facts = await this.facts(id);
    for (let round = 0; round < ROUNDS; round++) {
      const decision = decideCopy(facts.state, command, facts.facts);
      const { written, now } = await writeCopyTransition(this.database, {
        copyId: id,
        expectedVersion: facts.version,
        from: decision.from,
        to: decision.status,
        event: command.type,
        failureCount: decision.context.deletionFailureCount,
        lastError: decision.context.lastError,
        by: options.by,
        reason: options.reason ?? null,
        expect: {
          archiveCopyId: facts.facts.archive?.copyId ?? null,
          retained: facts.facts.retained,
          removedMembers: facts.facts.removedMembers,
          receipted: facts.facts.receipted,
          leaseExpired: facts.facts.leaseExpired,
          deletionId: facts.deletion?.id ?? null,
        },
        ...(options.fence === undefined ? {} : { fence: options.fence }),
        ...(options.plan === undefined ? {} : { plan: options.plan }),
        ...(options.takeover === undefined ? {} : { takeover: options.takeover }),
        ...(options.record === undefined ? {} : { record: options.record }),
      });
      if (written !== null) {
        return {
          ...decision,
          copyId: id,
          version: written.version,
          epoch: written.epoch,
          decidedOn: facts,
        };
      }
      if (now === null) throw notFound(id);
      if (options.fence !== undefined && now.deletion?.id === options.fence.deletionId) {
        const held = now.deletion;
        if (held.epoch !== options.fence.epoch || held.holder !== options.fence.holder) {
          throw new OpstateError(
            OpstateErrorCode.CONFLICT,
            `copy ${id}: the deletion's lease passed to ${held.holder} (epoch ${held.epoch}); this deleter stops`,
            { details: { copyId: id, holder: held.holder, epoch: held.epoch } },
          );
        }
      }
      facts = now;
    }
    throw new OpstateError(
      OpstateErrorCode.CONFLICT,
      `copy ${id} kept changing under ${command.type}; try again`,
      { retryable: true, details: { copyId: id } },
    );
  }

  /**
   * The copy's status history, oldest first.
   *
   * @example
   * ```ts
   * (await copies.history(copyId)).map((t) => `${t.from} → ${t.to} by ${t.by}`);
   * ```
   */
  async history(copyId: string): Promise<CopyTransitionEntry[]> {
    const rows = await this.database.execute(sql`
      select from_status, to_status, event, version, by, reason, at from physical_copy_transition
      where physical_copy_id = ${checkId(copyId, 'physical copy id')}::uuid order by id`);
    return rows.map((r) => ({
      from: r.from_status as PhysicalCopyStatus,
      to: r.to_status as PhysicalCopyStatus,
      event: String(r.event),
      version: Number(r.version),
      by: String(r.by),
      reason: r.reason == null ? null : String(r.reason),
      at: toDate(r.at) as Date,
    }));
  }
}
