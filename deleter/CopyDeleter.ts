import { randomUUID } from 'node:crypto';
import { crashable, faultsOf } from '../loops/drill.ts';
import { startLoop } from '../loops/Loop.ts';
import type { Clock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import type { Logger } from '../observe/Logger.ts';
import { CopyLifecycle } from '../persistence/CopyLifecycle.ts';
import { DeletionPolicyRepository } from '../persistence/DeletionPolicyRepository.ts';
import { DeletionRepository } from '../persistence/DeletionRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { timeOrderedId } from '../persistence/timeOrderedId.ts';
import { planDeletion, rootIdentity } from './planDeletion.ts';
import { type DeleterFaults, type DeletionRunResult, runDeletion } from './runDeletion.ts';

export interface CopyDeleterOptions {
  readonly database: Database;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Names this deleter in leases, outcomes and history rows (default `deleter-<random>`). */
  readonly id?: string;
  /** Wait between passes when idle (default 5 s). */
  readonly intervalMs?: number;
  /**
   * How long a deletion stays with this deleter without a renewal (default 60 s). Renewed before
   * every member and every third of it in between; another deleter takes over once it runs out.
   */
  readonly leaseMs?: number;
  /** Copies scheduled, planned or taken over per pass (default 16). */
  readonly batchSize?: number;
  /**
   * How long a member some process holds open is rechecked before it is kept and the deletion
   * fails for an operator (default 5 s).
   */
  readonly openWaitMs?: number;
}

/** A running deleter. */
export interface CopyDeleter {
  readonly id: string;
  /** Run a pass now. */
  wake(): void;
  /** Stops after the current member; the lease of an unfinished deletion runs out for another. */
  stop(): Promise<void>;
}

/** Routine refusals (a lost race, a guard that said no): logged at DEBUG, not as failures. */
function routine(err: unknown): boolean {
  return (
    err instanceof OpstateError &&
    (err.code === OpstateErrorCode.UNSAFE ||
      err.code === OpstateErrorCode.CONFLICT ||
      err.code === OpstateErrorCode.INVALID_EVENT)
  );
}

/**
 * Starts a deleter: the physical-copy machine's worker, recovered like operations but not one of
 * them. Each pass, under the deletion policy read at that moment:
 * 1. schedules the deletion of eligible copies (a verified archive of them completed more than the
 *    grace period ago, a cleaned location type, no claim) — the copy machine's guard decides;
 * 2. plans each scheduled deletion against its archive and starts it (the plan and the lease are
 *    written with START_DELETION, before any unlink), then runs it (`runDeletion`);
 * 3. takes over deletions whose lease ran out (RESUME_DELETION: one interruption counted, up to
 *    the policy's cap, then DELETION_FAILED for an operator) and resumes them where they stood.
 * A deletion is planned and resumed only where its storage root is mounted (same device and inode
 * as when planned), so a deleter on another host never mistakes an unmounted folder for deleted
 * files.
 *
 * @example
 * ```ts
 * const deleter = startCopyDeleter({ database, clock: systemClock, logger: consoleLogger });
 * await deleter.stop();
 * ```
 */
export function startCopyDeleter(options: CopyDeleterOptions): CopyDeleter {
  const { database, clock, logger } = options;
  const d: Deleter = {
    options,
    id: options.id ?? `deleter-${randomUUID().slice(0, 8)}`,
    leaseMs: options.leaseMs ?? 60_000,
    batch: options.batchSize ?? 16,
    copies: new CopyLifecycle(database),
    deletions: new DeletionRepository(database),
    policies: new DeletionPolicyRepository(database),
    state: { alive: true },
    faults: faultsOf<DeleterFaults>(options),
  };
  const loop = startLoop({
    name: `copy deleter ${d.id}`,
    intervalMs: options.intervalMs ?? 5_000,
    clock,
    logger,
    pass: async () => {
      if (!d.state.alive) return false;
      await scheduleEligible(d);
      await startScheduled(d);
      await resumeLapsed(d);
      return false;
    },
  });
  logger.log('INFO', 'copy deleter started', { deleter: d.id, leaseMs: d.leaseMs });
  const deleter: CopyDeleter = {
    id: d.id,
    wake: () => loop.wake(),
    async stop() {
      d.state.alive = false;
      await loop.stop();
    },
  };
  // A drill's crash (`crash(deleter)` from opstate/testing): from now on it unlinks and writes
  // nothing, and its lease is left to run out.
  return crashable(deleter, async () => {
    d.state.alive = false;
    await loop.stop();
    logger.log('WARNING', 'copy deleter crashed (drill)', { deleter: d.id });
  });
}

/** What one deleter's passes work with. */
interface Deleter {
  readonly options: CopyDeleterOptions;
  readonly id: string;
  readonly leaseMs: number;
  readonly batch: number;
  readonly copies: CopyLifecycle;
  readonly deletions: DeletionRepository;
  readonly policies: DeletionPolicyRepository;
  /** False once the deleter stops or crashes. */
  readonly state: { alive: boolean };
  /** A drill's fault points (`withFaults`), if any. */
  readonly faults: DeleterFaults | undefined;
}

/** Whether a storage root is mounted here as it was when planned (same device and inode). */
async function mountedHere(root: { rootPath: string; rootDevice: string; rootInode: string }) {
  try {
    const now = await rootIdentity(root.rootPath);
    return now.device === root.rootDevice && now.inode === root.rootInode;
  } catch {
    return false;
  }
}

/** Runs a deletion with a lease renewal beside it, and logs how it ended. */
async function runRenewed(
  d: Deleter,
  copyId: string,
  deletionId: string,
  epoch: number,
): Promise<DeletionRunResult> {
  const { clock, logger } = d.options;
  const renewal = new AbortController();
  const renewing = (async () => {
    while (!renewal.signal.aborted) {
      await clock.sleep(Math.max(50, Math.floor(d.leaseMs / 3)), renewal.signal);
      if (renewal.signal.aborted || !d.state.alive) break;
      await d.deletions.renew(deletionId, epoch, d.id, d.leaseMs).catch(() => undefined);
    }
  })();
  try {
    const result = await runDeletion({
      deletions: d.deletions,
      copies: d.copies,
      copyId,
      deletionId,
      epoch,
      holder: d.id,
      leaseMs: d.leaseMs,
      alive: () => d.state.alive,
      ...(d.faults === undefined ? {} : { faults: d.faults }),
      clock: d.options.clock,
      ...(d.options.openWaitMs === undefined ? {} : { openWaitMs: d.options.openWaitMs }),
    });
    if (result.result === 'failed') {
      logger.log('WARNING', 'copy deletion kept members; an operator must review', {
        deleter: d.id,
        copyId,
        kept: result.kept,
        reasons: result.reasons,
      });
    } else if (result.result === 'deleted') {
      logger.log('INFO', 'copy deleted with a receipt', { deleter: d.id, copyId, ...result });
    } else if (d.state.alive) {
      logger.log('INFO', 'deleter stopped a deletion', { deleter: d.id, copyId, why: result.why });
    }
    return result;
  } finally {
    renewal.abort();
    await renewing;
  }
}

/** 1. Schedules the deletion of eligible copies; the copy machine's guard decides. */
async function scheduleEligible(d: Deleter): Promise<void> {
  const policy = await d.policies.get();
  for (const c of await d.deletions.eligible(policy, d.batch)) {
    if (!d.state.alive) return;
    try {
      await d.copies.apply(
        c.copyId,
        { type: 'SCHEDULE_DELETION' },
        {
          by: d.id,
          reason: `archived and verified by operation ${c.archiveOperationId}; the policy cleans ${c.locationType} copies ${policy.graceSeconds} s after the archive`,
        },
      );
    } catch (err) {
      if (!routine(err)) throw err;
      d.options.logger.log('DEBUG', 'deletion not scheduled', {
        copyId: c.copyId,
        err,
      });
    }
  }
}

type ScheduledCopy = Awaited<ReturnType<DeletionRepository['scheduled']>>[number];

/** 2. Plans each scheduled deletion mounted here, starts it (plan and lease first) and runs it. */
async function startScheduled(d: Deleter): Promise<void> {
  // Claimed for a lease: no other deleter plans these copies meanwhile.
  for (const copy of await d.deletions.scheduled(d.batch, d.leaseMs)) {
    if (!d.state.alive) return;
    try {
      await rootIdentity(copy.storageRoot);
    } catch {
      await d.deletions.releaseClaim(copy.id); // not mounted here: another deleter plans it
      continue;
    }
    try {
      const plan = await planFor(d, copy);
      if (plan === undefined || !d.state.alive) continue;
      const started = await d.copies.apply(
        copy.id,
        { type: 'START_DELETION' },
        { by: d.id, reason: `plan of ${plan.members.length} member(s) written`, plan },
      );
      await d.faults?.afterPlan?.({
        copyId: copy.id,
        deletionId: plan.deletionId,
        epoch: started.epoch ?? 1,
        path: plan.path,
      });
      await runRenewed(d, copy.id, plan.deletionId, started.epoch ?? 1);
    } catch (err) {
      if (!routine(err)) throw err;
      d.options.logger.log('DEBUG', 'deletion not started', {
        copyId: copy.id,
        err,
      });
    }
  }
}

/**
 * The plan of a scheduled copy against its verified archive, leaving out members earlier plans
 * already removed; undefined when there is no archive to plan against (START_DELETION is then
 * sent without a plan, and the guard refuses it with the reason: the copy stays scheduled).
 */
async function planFor(d: Deleter, copy: ScheduledCopy) {
  const facts = await d.copies.facts(copy.id);
  const archive = facts.facts.archive;
  const archived =
    archive === null ? null : await d.deletions.archivedManifest(archive.operationId);
  if (archive === null || archived === null || facts.archiveObjectSha256 === null) {
    await d.copies.apply(copy.id, { type: 'START_DELETION' }, { by: d.id });
    return undefined;
  }
  const gone = new Set<string>();
  for (const earlier of await d.deletions.plansOf(copy.id)) {
    const loaded = await d.deletions.load(earlier.id);
    for (const m of loaded?.members ?? []) {
      if (m.outcome === 'DELETED' || m.outcome === 'MISSING') gone.add(m.path);
    }
  }
  return planDeletion({
    copy,
    archive: { ...archive, objectSha256: facts.archiveObjectSha256 },
    archived,
    alreadyGone: gone,
    holder: d.id,
    leaseMs: d.leaseMs,
    deletionId: timeOrderedId(d.options.clock.now()),
  });
}

/** 3. Takes over deletions whose lease ran out (mounted here) and resumes them where they stood. */
async function resumeLapsed(d: Deleter): Promise<void> {
  const { logger } = d.options;
  for (const lapsed of await d.deletions.lapsed(d.batch)) {
    if (!d.state.alive) return;
    if (!(await mountedHere(lapsed))) continue;
    try {
      const taken = await d.copies.apply(
        lapsed.copyId,
        { type: 'RESUME_DELETION' },
        {
          by: d.id,
          reason: `the lease of ${lapsed.holder} ran out; resuming where it stood`,
          takeover: { holder: d.id, leaseMs: d.leaseMs },
        },
      );
      if (taken.status === PhysicalCopyStatus.DELETION_FAILED) {
        logger.log('WARNING', 'copy deletion interrupted too often; an operator must review', {
          deleter: d.id,
          copyId: lapsed.copyId,
          error: taken.context.lastError,
        });
        continue;
      }
      logger.log('INFO', 'deleter took over a deletion whose lease ran out', {
        deleter: d.id,
        copyId: lapsed.copyId,
        from: lapsed.holder,
        epoch: taken.epoch,
      });
      await runRenewed(d, lapsed.copyId, lapsed.deletionId, taken.epoch ?? 0);
    } catch (err) {
      if (!routine(err)) throw err;
      logger.log('DEBUG', 'takeover lost', { copyId: lapsed.copyId, err });
    }
  }
}
