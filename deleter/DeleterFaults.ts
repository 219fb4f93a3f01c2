import type { MemberOutcome } from '../machines/ArchiveState.ts';

/**
 * Where a crash drill may stop a deleter. Each runs at its point; a drill makes it kill the
 * process. Never set in normal operation.
 */
export interface DeleterFaults {
  /** The plan is written (START_DELETION committed); no member touched yet. */
  afterPlan?(at: FaultPoint): void | Promise<void>;
  /** Member `seq` was unlinked (or kept); its outcome is not recorded yet. */
  afterMember?(at: FaultPoint & { seq: number; outcome: MemberOutcome }): void | Promise<void>;
  /** Every member has its outcome recorded; the receipt is not written yet. */
  beforeReceipt?(at: FaultPoint): void | Promise<void>;
  /** The receipt is written; the copy is not yet DELETED. */
  afterReceipt?(at: FaultPoint): void | Promise<void>;
}

/** Where a deleter fault fires: the copy, its plan, the lease epoch running it, the copy's path. */
export interface FaultPoint {
  readonly copyId: string;
  readonly deletionId: string;
  readonly epoch: number;
  readonly path: string;
}
