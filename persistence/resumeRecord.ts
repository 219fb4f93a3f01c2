import { sql } from 'drizzle-orm';
import { type ArchiveState, MemberOutcome } from '../machines/ArchiveState.ts';
import { nextSafeAction } from '../machines/nextSafeAction.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import { type ArchiveRecordEntry, ArchiveRecordRepository } from './ArchiveRecordRepository.ts';
import { CopyLifecycle, type CopyTransitionEntry } from './CopyLifecycle.ts';
import { DeletionPolicyRepository } from './DeletionPolicyRepository.ts';
import {
  type DeletionMemberRecord,
  type DeletionPlanRecord,
  type DeletionReceipt,
  DeletionRepository,
} from './DeletionRepository.ts';
import type { OperationInspection } from './inspectOperation.ts';
import type { Database } from './openDatabase.ts';

/** The resume record of an archive-then-delete batch: what `opstate inspect` shows. */
export interface ResumeRecord {
  /** The last durable transition of the archive record. */
  readonly lastDurable: {
    state: ArchiveState;
    at: Date;
    by: string;
    attempt: number | null;
  } | null;
  readonly source: {
    readonly copyId: string;
    readonly locationType: string;
    readonly path: string | null;
    readonly checksum: string | null;
    readonly status: string;
    readonly members: number | null;
  } | null;
  readonly archive: {
    readonly key: string | null;
    readonly objectVersion: string | null;
    readonly objectSha256: string | null;
    readonly contentSha256: string | null;
    readonly size: number | null;
    readonly encrypted: boolean | null;
    /** A fingerprint of the key that sealed it, never the key. */
    readonly keyId: string | null;
    readonly verification: 'VERIFIED' | 'VERIFY_FAILED' | null;
    readonly copyId: string | null;
  } | null;
  readonly deletion: {
    readonly status: string;
    readonly failures: number;
    readonly maxFailures: number;
    readonly lastError: string | null;
    readonly plans: number;
    /** Members of the current plan. */
    readonly planned: number;
    readonly current: Omit<DeletionPlanRecord, 'rootDevice' | 'rootInode'> | null;
    readonly leaseExpired: boolean;
    readonly deleted: readonly DeletionMemberRecord[];
    readonly missing: readonly DeletionMemberRecord[];
    readonly kept: readonly DeletionMemberRecord[];
    readonly remaining: readonly DeletionMemberRecord[];
    readonly history: readonly CopyTransitionEntry[];
  } | null;
  readonly receipt: DeletionReceipt | null;
  readonly policy: {
    readonly cleaned: boolean;
    readonly graceSeconds: number;
    readonly eligibleAt: Date | null;
  };
  readonly retainedBy: readonly string[];
  /** Every archive record row, oldest first (manifests left out). */
  readonly records: readonly Omit<ArchiveRecordEntry, 'manifest'>[];
  readonly nextSafeAction: string;
}

/**
 * Assembles the resume record of a long-term-archive operation from the database alone (no
 * worker): its archive record, the archive identity, its source copy's deletion — every plan's
 * members deleted, found missing, kept with the reason, not yet reached — the receipt, and the
 * next safe action (`nextSafeAction`). Undefined for an operation of another kind.
 *
 * @example
 * ```ts
 * const resume = await loadResumeRecord(database, await inspectOperation(database, id));
 * console.log(resume?.nextSafeAction);
 * ```
 */
export async function loadResumeRecord(
  database: Database,
  view: OperationInspection,
): Promise<ResumeRecord | undefined> {
  if (view.kind !== OperationKind.LONG_TERM_ARCHIVE) return undefined;
  const records = await new ArchiveRecordRepository(database).list(view.id);
  const deletions = new DeletionRepository(database);
  const policy = await new DeletionPolicyRepository(database).get();
  const last = records.at(-1) ?? null;
  const verification =
    [...records].reverse().find((r) => r.state === 'VERIFIED' || r.state === 'VERIFY_FAILED') ??
    null;
  const identity =
    [...records]
      .reverse()
      .find(
        (r) =>
          r.objectSha256 !== null &&
          (r.state === 'UPLOADED' || r.state === 'READ_BACK' || r.state === 'VERIFIED'),
      ) ??
    [...records].reverse().find((r) => r.state === 'PLANNED') ??
    null;
  const planned = [...records].reverse().find((r) => r.state === 'PLANNED');
  const listed = (planned?.manifest as { members?: unknown } | null | undefined)?.members;
  const plannedMembers = Array.isArray(listed) ? listed.length : null;
  const sourceCopy = view.inputs[0] ?? null;
  const archiveCopy = view.outputs[0] ?? null;
  let locationType = '';
  if (sourceCopy !== null) {
    const [l] = await database.execute(
      sql`select location_type from data_location where id = ${sourceCopy.locationId}::uuid`,
    );
    locationType = String(l?.location_type ?? '');
  }
  let deletion: ResumeRecord['deletion'] = null;
  let receipt: DeletionReceipt | null = null;
  let retainedBy: readonly string[] = [];
  let currentDone = { deleted: 0, missing: 0 };
  if (sourceCopy !== null) {
    const lifecycle = new CopyLifecycle(database);
    const facts = await lifecycle.facts(sourceCopy.id);
    retainedBy = facts.facts.retainedBy;
    const plans = await deletions.plansOf(sourceCopy.id);
    const members: DeletionMemberRecord[] = [];
    let current: DeletionPlanRecord | null = null;
    for (const p of plans) {
      const loaded = await deletions.load(p.id);
      members.push(...(loaded?.members ?? []));
      current = p;
    }
    const currentMembers =
      current === null ? [] : ((await deletions.load(current.id))?.members ?? []);
    receipt = (await deletions.receiptOf(sourceCopy.id)) ?? null;
    currentDone = {
      deleted: currentMembers.filter((m) => m.outcome === MemberOutcome.DELETED).length,
      missing: currentMembers.filter((m) => m.outcome === MemberOutcome.MISSING).length,
    };
    if (plans.length > 0 || facts.state.status !== 'PRESENT') {
      const { rootDevice: _d, rootInode: _i, ...shown } = current ?? ({} as DeletionPlanRecord);
      deletion = {
        status: facts.state.status,
        failures: facts.state.deletionFailureCount,
        maxFailures: facts.state.maxDeletionFailures,
        lastError: facts.state.lastError,
        plans: plans.length,
        planned: currentMembers.length,
        current: current === null ? null : shown,
        leaseExpired: current !== null && current.leaseUntil.getTime() < Date.now(),
        deleted: members.filter((m) => m.outcome === MemberOutcome.DELETED),
        missing: members.filter((m) => m.outcome === MemberOutcome.MISSING),
        kept: currentMembers.filter((m) => m.outcome === MemberOutcome.KEPT),
        remaining: currentMembers.filter((m) => m.outcome === null),
        history: await lifecycle.history(sourceCopy.id),
      };
    }
  }
  const eligibleAt =
    view.finishedAt === null
      ? null
      : new Date(view.finishedAt.getTime() + policy.graceSeconds * 1000);
  const cleaned = policy.cleanLocationTypes.some((t) => t === locationType);
  const generation = Math.max(1, ...records.map((r) => r.generation));
  const record: ResumeRecord = {
    lastDurable:
      last === null ? null : { state: last.state, at: last.at, by: last.by, attempt: last.attempt },
    source:
      sourceCopy === null
        ? null
        : {
            copyId: sourceCopy.id,
            locationType,
            path: sourceCopy.path,
            checksum: sourceCopy.checksum,
            status: sourceCopy.status,
            members: plannedMembers,
          },
    archive:
      identity === null
        ? null
        : {
            key: identity.archiveKey,
            objectVersion: identity.objectVersion,
            objectSha256: identity.objectSha256,
            contentSha256: identity.contentSha256,
            size: identity.size,
            encrypted: identity.encrypted,
            keyId: identity.keyId,
            verification: (verification?.state ?? null) as 'VERIFIED' | 'VERIFY_FAILED' | null,
            copyId: archiveCopy?.id ?? null,
          },
    deletion,
    receipt,
    policy: { cleaned, graceSeconds: policy.graceSeconds, eligibleAt },
    retainedBy,
    records: records.map(({ manifest: _m, ...r }) => r),
    nextSafeAction: '',
  };
  const d = record.deletion;
  const action = nextSafeAction({
    operationId: view.id,
    operationStatus: view.status,
    attempt: view.attempt,
    lastState: last?.state ?? null,
    lastError: view.lastError,
    verification:
      view.status === OperationStatus.COMPLETED || verification !== null
        ? ((verification?.state ?? null) as 'VERIFIED' | 'VERIFY_FAILED' | null)
        : null,
    source:
      record.source === null
        ? null
        : { status: (d?.status ?? record.source.status) as never, locationType },
    policy: { cleaned, eligibleAt },
    retainedBy,
    deletion:
      d === null || d.current === null
        ? null
        : {
            holder: d.current.holder,
            leaseUntil: d.current.leaseUntil,
            leaseExpired: d.leaseExpired,
            planned: d.planned,
            deleted: d.status === 'DELETED' ? d.deleted.length : currentDone.deleted,
            missing: d.status === 'DELETED' ? d.missing.length : currentDone.missing,
            kept: d.kept.length,
            remaining: d.remaining.length,
            receipted: receipt !== null,
            failures: d.failures,
            maxFailures: d.maxFailures,
          },
    now: new Date(),
  });
  return {
    ...record,
    nextSafeAction: `${action}${generation > 1 ? ` [plan generation ${generation}]` : ''}`,
  };
}
