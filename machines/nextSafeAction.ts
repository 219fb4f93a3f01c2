import type { ArchiveState } from './ArchiveState.ts';
import type { OperationStatus } from './operationMachine.ts';
import type { PhysicalCopyStatus } from './physicalCopyMachine.ts';

/** The durable facts of an archive-then-delete batch that decide what may safely happen next. */
export interface ResumeFacts {
  readonly operationId: string;
  readonly operationStatus: OperationStatus;
  readonly attempt: number;
  /** The last row of the archive record, if any. */
  readonly lastState: ArchiveState | null;
  /** The last error of the operation, when it failed. */
  readonly lastError: { readonly message: string; readonly code?: string } | null;
  /** The archive's last verification (handler or independent). */
  readonly verification: 'VERIFIED' | 'VERIFY_FAILED' | null;
  readonly source: {
    readonly status: PhysicalCopyStatus;
    readonly locationType: string;
  } | null;
  /** Whether the deletion policy cleans the source's location type, and when it becomes eligible. */
  readonly policy: {
    readonly cleaned: boolean;
    readonly eligibleAt: Date | null;
  };
  readonly retainedBy: readonly string[];
  readonly deletion: {
    readonly holder: string;
    readonly leaseUntil: Date;
    readonly leaseExpired: boolean;
    readonly planned: number;
    readonly deleted: number;
    readonly missing: number;
    readonly kept: number;
    readonly remaining: number;
    readonly receipted: boolean;
    readonly failures: number;
    readonly maxFailures: number;
  } | null;
  readonly now: Date;
}

const iso = (d: Date) => d.toISOString();

/**
 * The one next safe action for an archive-then-delete batch, computed from its durable state
 * alone (never from a worker's memory): what will happen by itself, what an operator must do, or
 * that it is done. A restart never needs more than this line to know where it stands.
 *
 * @example
 * ```ts
 * nextSafeAction(facts); // 'resume: revalidate and delete 12 remaining members (…)'
 * ```
 */
export function nextSafeAction(f: ResumeFacts): string {
  const retry = `opstate retry ${f.operationId} --replan`;
  if (f.operationStatus === 'FAILED') {
    if (f.lastState === 'CONFLICT') {
      return `blocked: another object is at the archive key and was never overwritten — source kept; compare it with the source, move it aside if it is wrong, then \`${retry}\``;
    }
    if (f.verification === 'VERIFY_FAILED' || f.lastState === 'VERIFY_FAILED') {
      return `blocked: the archive does not read back as written — never VERIFIED, source kept; investigate the archive storage, then \`${retry}\``;
    }
    return `blocked: no verified archive — source kept, investigate (${f.lastError?.message ?? 'no error recorded'}), then \`${retry}\``;
  }
  if (f.operationStatus !== 'COMPLETED') {
    const at = f.lastState === null ? 'nothing recorded yet' : `last durable state ${f.lastState}`;
    return `wait: the archive is running (attempt ${f.attempt}, ${at}); a worker that dies is replaced by the heartbeat monitor, and the next attempt resumes from ${f.lastState ?? 'the plan'}`;
  }
  if (f.verification !== 'VERIFIED') {
    return `blocked: no verified archive${f.verification === 'VERIFY_FAILED' ? ' (the last verification failed)' : ''} — source kept, investigate with \`opstate archive verify ${f.operationId}\``;
  }
  const d = f.deletion;
  const s = f.source;
  if (s === null) return 'done: archive verified (no source copy recorded)';
  switch (s.status) {
    case 'DELETED':
      return `done: source deleted with a receipt (${d?.deleted ?? 0} members deleted, ${d?.missing ?? 0} found missing); archive verified`;
    case 'PRESENT':
      if (!f.policy.cleaned) {
        return `done: archive verified; the source is kept by policy (${s.locationType} copies are not cleaned after archive)`;
      }
      if (f.retainedBy.length > 0) {
        return `wait: the source is held by a retention claim (group ${f.retainedBy.join(', ')}); it becomes eligible when the claim is released`;
      }
      if (f.policy.eligibleAt !== null && f.policy.eligibleAt > f.now) {
        return `wait: the source becomes eligible for deletion at ${iso(f.policy.eligibleAt)} (grace period)`;
      }
      return 'wait: eligible — a deleter (`opstate worker --delete-copies`) will schedule, plan and delete the source';
    case 'DELETION_SCHEDULED':
      return 'wait: deletion scheduled — a deleter will plan it against the archive and delete the source';
    case 'DELETION_IN_PROGRESS': {
      if (d === null) return 'wait: deletion starting';
      if (d.remaining === 0 && !d.receipted) {
        return d.leaseExpired
          ? `resume: write the receipt (all ${d.planned} members accounted for), then mark the source DELETED (lease of ${d.holder} expired at ${iso(d.leaseUntil)}; any deleter takes over)`
          : `wait: ${d.holder} is writing the receipt (all ${d.planned} members accounted for)`;
      }
      if (d.receipted) return 'resume: the receipt is durable; mark the source DELETED';
      return d.leaseExpired
        ? `resume: revalidate and delete ${d.remaining} remaining member${d.remaining === 1 ? '' : 's'} (lease of ${d.holder} expired at ${iso(d.leaseUntil)}; any deleter takes over, interruption ${d.failures + 1} of ${d.maxFailures})`
        : `wait: ${d.holder} is deleting (${d.deleted + d.missing + d.kept} of ${d.planned} done; lease until ${iso(d.leaseUntil)})`;
    }
    case 'DELETION_FAILED':
      return `review: ${d?.kept ?? 0} member${d?.kept === 1 ? '' : 's'} kept (reasons above)${d !== null && d.remaining > 0 ? `, ${d.remaining} not reached` : ''}${d !== null && d.deleted > 0 ? `; the source is partly deleted (${d.deleted} member${d.deleted === 1 ? '' : 's'} removed, restorable from the archive)` : ''}; after review \`${retry}\` plans the deletion again against the archive`;
  }
}
