import type { MemberOutcome } from '../machines/ArchiveState.ts';

/**
 * What a deletion plan says, as it is written and as it is read back: the archive it relies on,
 * the copy's path and the root it was planned on, and the deleter that holds it.
 *
 * @example
 * ```ts
 * const { archiveOperationId, rootPath, holder }: DeletionPlanFields = (await deletions.load(id))!.plan;
 * ```
 */
export interface DeletionPlanFields {
  readonly archiveOperationId: string;
  readonly archiveCopyId: string;
  readonly archiveDigest: string;
  readonly archiveObjectSha256: string;
  readonly path: string;
  readonly folder: boolean;
  readonly rootPath: string;
  readonly rootDevice: string;
  readonly rootInode: string;
  readonly holder: string;
}

/**
 * A deletion plan as stored: its fields, the copy, its number among the copy's plans, the lease.
 *
 * @example
 * ```ts
 * const plans: DeletionPlanRecord[] = await deletions.plansOf(copyId);
 * ```
 */
export interface DeletionPlanRecord extends DeletionPlanFields {
  readonly id: string;
  readonly copyId: string;
  readonly plan: number;
  readonly epoch: number;
  readonly leaseUntil: Date;
  readonly createdAt: Date;
}

/**
 * One member of a plan as planned: where it is and what it was (device, inode, size, mtime,
 * digest), checked again right before its unlink.
 *
 * @example
 * ```ts
 * const member: PlannedMemberRow = { seq: 0, name: 'a.dat', path, device: '2049', inode: '131', size: 12, mtimeNs, sha256 };
 * ```
 */
export interface PlannedMemberRow {
  readonly seq: number;
  readonly name: string;
  readonly path: string;
  readonly device: string;
  readonly inode: string;
  readonly size: number;
  readonly mtimeNs: string;
  readonly sha256: string;
}

/**
 * A planned member with its outcome, if it has one yet.
 *
 * @example
 * ```ts
 * const remaining = (await deletions.load(id))!.members.filter((m: DeletionMemberRecord) => m.outcome === null);
 * ```
 */
export interface DeletionMemberRecord extends PlannedMemberRow {
  readonly outcome: MemberOutcome | null;
  readonly reason: string | null;
  readonly epoch: number | null;
  readonly at: Date | null;
}

/**
 * A member that already failed at planning time (kept, or missing), recorded with the plan.
 *
 * @example
 * ```ts
 * const outcome: PlanOutcomeRow = { seq: 3, outcome: 'KEPT', reason: 'open by another process' };
 * ```
 */
export interface PlanOutcomeRow {
  readonly seq: number;
  readonly outcome: 'KEPT' | 'MISSING';
  readonly reason: string;
}

/**
 * The deletion plan the START_DELETION that starts it writes, in the same statement.
 *
 * @example
 * ```ts
 * const plan: DeletionPlanInsert = await planDeletion(input);
 * await copies.apply(copyId, { type: 'START_DELETION' }, { by: holder, plan });
 * ```
 */
export interface DeletionPlanInsert extends DeletionPlanFields {
  readonly deletionId: string;
  readonly leaseMs: number;
  readonly members: readonly PlannedMemberRow[];
  readonly outcomes: readonly PlanOutcomeRow[];
  /** Detail for the SOURCE_REVALIDATED archive record row (counts, bytes, unplanned entries). */
  readonly detail: Record<string, unknown>;
}

/**
 * One member's outcome, as a deleter records it.
 *
 * @example
 * ```ts
 * const facts = await deletions.step({ deletionId, epoch, holder, leaseMs, previous: { seq, outcome: 'DELETED', reason: null } });
 * ```
 */
export interface OutcomeInput {
  readonly seq: number;
  readonly outcome: MemberOutcome;
  readonly reason: string | null;
}
