import { rmdir, unlink } from 'node:fs/promises';
import { type MemberOutcome, MemberOutcome as Outcome } from '../machines/ArchiveState.ts';
import { type Clock, systemClock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { CopyLifecycle } from '../persistence/CopyLifecycle.ts';
import type { OutcomeInput } from '../persistence/DeletionPlan.ts';
import type { DeletionRepository } from '../persistence/DeletionRepository.ts';
import type { DeleterFaults, FaultPoint } from './DeleterFaults.ts';
import { scanOpenFiles } from './openFiles.ts';
import { identityProblem, revalidateMember } from './revalidateMember.ts';
import type { SyscallCount } from './SyscallCount.ts';

export type { DeleterFaults, FaultPoint } from './DeleterFaults.ts';

/** How one run of a deletion ended. */
export type DeletionRunResult =
  | {
      readonly result: 'deleted';
      readonly deleted: number;
      readonly missing: number;
      readonly bytes: number;
    }
  | { readonly result: 'failed'; readonly kept: number; readonly reasons: readonly string[] }
  /** The lease passed to another deleter, or this one stopped: nothing more was written. */
  | { readonly result: 'stopped'; readonly why: string };

export interface RunDeletionOptions {
  readonly deletions: DeletionRepository;
  readonly copies: CopyLifecycle;
  readonly copyId: string;
  readonly deletionId: string;
  readonly epoch: number;
  readonly holder: string;
  readonly leaseMs: number;
  readonly faults?: DeleterFaults;
  /** False once the deleter stops or crashes: nothing is unlinked or written after that. */
  readonly alive: () => boolean;
  readonly count?: SyscallCount;
  /**
   * How long a member some process holds open is rechecked before it is kept (default 5,000 ms):
   * a reader that closes it soon — another deleter hashing it while its lease passed here — does
   * not fail the deletion; one that keeps it open does.
   */
  readonly openWaitMs?: number;
  /** Times the rechecks of a member held open (default the system clock). */
  readonly clock?: Clock;
}

/** The default of `openWaitMs`, and the pause between rechecks of a member held open. */
export const DEFAULT_OPEN_WAIT_MS = 5_000;
const OPEN_RECHECK_MS = 250;

class Stopped extends Error {}

/**
 * Runs (or resumes) one deletion plan under a lease. For every member without an outcome: one
 * statement records the previous member's outcome, renews the lease and reads the facts
 * (`DeletionRepository.step`); the member is revalidated with real system calls
 * (`revalidateMember`), its identity checked once more, and only then unlinked. A member that
 * fails any check — or every member, once the archive is no longer VERIFIED, the policy no longer
 * cleans the location, or a claim holds the copy — is kept with the reason. Then: kept members
 * make the copy DELETION_FAILED for an operator; otherwise the folder (now empty) is removed, the
 * receipt is written, and only then is the copy DELETED. Resumable from any point: members that
 * already have an outcome are skipped, a member already gone is recorded MISSING, and an existing
 * receipt is reused.
 *
 * @example
 * ```ts
 * const r = await runDeletion({ deletions, copies, copyId, deletionId, epoch, holder, leaseMs, alive: () => true });
 * ```
 */
export async function runDeletion(o: RunDeletionOptions): Promise<DeletionRunResult> {
  try {
    const loaded = await o.deletions.load(o.deletionId);
    if (loaded === undefined) return { result: 'stopped', why: 'the plan is gone' };
    const at: FaultPoint = {
      copyId: o.copyId,
      deletionId: o.deletionId,
      epoch: o.epoch,
      path: loaded.plan.path,
    };
    const final = await runMembers(o, loaded.members, loaded.plan.rootPath, at);
    if (final.kept > 0) return await keepForOperator(o);
    return await receiptThenDeleted(o, loaded.plan, at);
  } catch (err) {
    if (err instanceof Stopped) return { result: 'stopped', why: err.message };
    if (err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT) {
      return { result: 'stopped', why: err.message };
    }
    throw err;
  }
}

type Verdict = { outcome: MemberOutcome; reason: string | null };
type Loaded = NonNullable<Awaited<ReturnType<DeletionRepository['load']>>>;

/** Throws `Stopped` once the deleter stopped: nothing is unlinked or written after that. */
function live(o: RunDeletionOptions): void {
  if (!o.alive()) throw new Stopped('the deleter stopped');
}

/**
 * What the facts read with a member's step say about every member, pure: kept (with the reason)
 * when the archive is no longer VERIFIED as planned, the policy no longer cleans the location, or
 * a retention claim holds the copy; undefined when the member may be revalidated and unlinked.
 *
 * @example
 * ```ts
 * const kept = keptByFacts(await deletions.step(input)); // { outcome: 'KEPT', reason } | undefined
 * ```
 */
export function keptByFacts(facts: {
  readonly archiveOk: boolean;
  readonly archiveProblem: string | null;
  readonly cleaned: boolean;
  readonly locationType: string;
  readonly retainedBy: readonly string[];
}): Verdict | undefined {
  if (!facts.archiveOk) {
    return {
      outcome: Outcome.KEPT,
      reason: `the archive is no longer VERIFIED as planned: ${facts.archiveProblem}`,
    };
  }
  if (!facts.cleaned) {
    return {
      outcome: Outcome.KEPT,
      reason: `the deletion policy no longer cleans ${facts.locationType} locations`,
    };
  }
  if (facts.retainedBy.length > 0) {
    return {
      outcome: Outcome.KEPT,
      reason: `a retention claim holds the copy (group ${facts.retainedBy.join(', ')})`,
    };
  }
  return undefined;
}

/**
 * Every member without an outcome: one step (records the previous member's outcome, renews the
 * lease, reads the facts), then kept by the facts or revalidated and unlinked. Returns the facts of
 * the final step, which records the last outcome.
 */
async function runMembers(
  o: RunDeletionOptions,
  members: Loaded['members'],
  storageRoot: string,
  at: FaultPoint,
) {
  let previous: OutcomeInput | undefined;
  const step = async (finish: boolean) => {
    live(o);
    const facts = await o.deletions.step({
      deletionId: o.deletionId,
      epoch: o.epoch,
      holder: o.holder,
      leaseMs: o.leaseMs,
      ...(previous === undefined ? {} : { previous }),
      finish,
    });
    if (!facts.leaseHeld) throw new Stopped('the lease passed to another deleter');
    previous = undefined;
    return facts;
  };
  for (const member of members.filter((m) => m.outcome === null)) {
    const facts = await step(false);
    let verdict = keptByFacts(facts);
    if (verdict === undefined) {
      const checked = await revalidateUntilClosed(o, member, facts.protectedPrefixes, storageRoot);
      verdict = checked.ok ? await unlinkMember(member, o, () => live(o)) : checked;
    }
    previous = { seq: member.seq, outcome: verdict.outcome, reason: verdict.reason };
    await o.faults?.afterMember?.({ ...at, seq: member.seq, outcome: verdict.outcome });
  }
  return step(true);
}

/**
 * Revalidates a member. When the only objection is a process holding it open, waits — rescanning
 * who holds it every quarter second, for up to `openWaitMs` — for it to be closed, and then
 * revalidates it whole once more (the holder may have changed it); a member still held open then
 * keeps its verdict. The member's bytes are read at most twice, however long the wait.
 */
async function revalidateUntilClosed(
  o: RunDeletionOptions,
  member: Parameters<typeof revalidateMember>[0],
  protectedPrefixes: readonly string[],
  storageRoot: string,
) {
  const checked = await revalidateMember(member, protectedPrefixes, storageRoot, o.count);
  if (checked.ok || checked.held !== true) return checked;
  const clock = o.clock ?? systemClock;
  const until = clock.now() + (o.openWaitMs ?? DEFAULT_OPEN_WAIT_MS);
  while (clock.now() < until) {
    await clock.sleep(OPEN_RECHECK_MS);
    live(o);
    if (scanOpenFiles(member.device, member.inode, o.count).holders.length === 0) {
      return revalidateMember(member, protectedPrefixes, storageRoot, o.count);
    }
  }
  return checked;
}

/** Members were kept: the copy becomes DELETION_FAILED with every kept member's reason. */
async function keepForOperator(o: RunDeletionOptions): Promise<DeletionRunResult> {
  const latest = await o.deletions.load(o.deletionId);
  const kept = (latest?.members ?? []).filter((m) => m.outcome === Outcome.KEPT);
  const deleted = (latest?.members ?? []).filter((m) => m.outcome === Outcome.DELETED).length;
  const reasons = kept.map((m) => `${m.name}: ${m.reason}`);
  // Say plainly when the copy is now partly gone: the kept files stay, the others are only in
  // the archive.
  const partly =
    deleted > 0
      ? `; the copy is partly deleted (${deleted} member(s) removed, restorable from the archive; the kept ones stay in place)`
      : '; nothing was deleted';
  live(o);
  await o.copies.apply(
    o.copyId,
    {
      type: 'DELETION_FAILED',
      error:
        `${kept.length} member(s) kept after revalidation${partly}: ${reasons.join('; ')}`.slice(
          0,
          2000,
        ),
    },
    {
      by: o.holder,
      reason: 'members kept; an operator reviews and may re-plan',
      fence: { deletionId: o.deletionId, epoch: o.epoch, holder: o.holder },
      record: { state: 'DELETION_FAILED', detail: { copyId: o.copyId, kept: reasons } },
    },
  );
  return { result: 'failed', kept: kept.length, reasons };
}

/** Every member is gone: remove the (now empty) folder, write the receipt, then DELETED. */
async function receiptThenDeleted(
  o: RunDeletionOptions,
  plan: Loaded['plan'],
  at: FaultPoint,
): Promise<DeletionRunResult> {
  let folderRemoved: boolean | string = false;
  if (plan.folder) {
    live(o);
    o.count?.add('rmdir');
    folderRemoved = await rmdir(plan.path).then(
      () => true,
      (err: NodeJS.ErrnoException) =>
        err.code === 'ENOENT'
          ? 'already gone'
          : `left in place (${err.code}: it holds files the package does not name)`,
    );
  }
  await o.faults?.beforeReceipt?.(at);
  live(o);
  const receipt = await o.deletions.receipt({
    deletionId: o.deletionId,
    epoch: o.epoch,
    holder: o.holder,
    detail: { folder: plan.folder ? plan.path : null, folderRemoved },
  });
  if (receipt === undefined) throw new Stopped('the receipt could not be written under this lease');
  await o.faults?.afterReceipt?.(at);
  live(o);
  await o.copies.apply(
    o.copyId,
    { type: 'DELETION_SUCCEEDED' },
    {
      by: o.holder,
      reason: `receipt written: ${receipt.membersDeleted} deleted, ${receipt.membersMissing} missing`,
    },
  );
  return {
    result: 'deleted',
    deleted: receipt.membersDeleted,
    missing: receipt.membersMissing,
    bytes: receipt.bytes,
  };
}

/** Checks the identity once more, right before the unlink, then unlinks. */
async function unlinkMember(
  member: Parameters<typeof revalidateMember>[0],
  o: RunDeletionOptions,
  live: () => void,
): Promise<{ outcome: MemberOutcome; reason: string | null }> {
  const again = await identityProblem(member, o.count);
  if (again !== undefined && !again.ok) return { outcome: again.outcome, reason: again.reason };
  live();
  try {
    o.count?.add('unlink');
    await unlink(member.path);
    return { outcome: Outcome.DELETED, reason: null };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      return {
        outcome: Outcome.MISSING,
        reason: 'gone between revalidation and unlink; not removed by this run',
      };
    }
    return { outcome: Outcome.KEPT, reason: `unlink failed (${code ?? String(err)})` };
  }
}
