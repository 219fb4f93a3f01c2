import { randomUUID } from 'node:crypto';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import { CopyLifecycle } from '../persistence/CopyLifecycle.ts';
import { DeletionPolicyRepository } from '../persistence/DeletionPolicyRepository.ts';
import { DeletionRepository } from '../persistence/DeletionRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { planDeletion, rootIdentity } from '../stages/deletion/planDeletion.ts';
import type { Clock } from './Clock.ts';
import type { Logger } from './Logger.ts';
import { startLoop } from './Loop.ts';
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
  /** Fault-injection points for crash drills; never set in normal operation. */
  readonly faults?: DeleterFaults;
}

/** A running deleter. */
export interface CopyDeleter {
  readonly id: string;
  /** Run a pass now. */
  wake(): void;
  /** Stops after the current member; the lease of an unfinished deletion runs out for another. */
  stop(): Promise<void>;
  /**
   * Dies as a killed process would, for drills in one process: from now on it unlinks and writes
   * nothing, and its lease is left to run out.
   */
  crash(): Promise<void>;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
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
  const id = options.id ?? `deleter-${randomUUID().slice(0, 8)}`;
  const leaseMs = options.leaseMs ?? 60_000;
  const batch = options.batchSize ?? 16;
  const copies = new CopyLifecycle(database);
  const deletions = new DeletionRepository(database);
  const policies = new DeletionPolicyRepository(database);
  let alive = true;

  const here = async (root: { rootPath: string; rootDevice: string; rootInode: string }) => {
    try {
      const now = await rootIdentity(root.rootPath);
      return now.device === root.rootDevice && now.inode === root.rootInode;
    } catch {
      return false;
    }
  };

  /** Runs a deletion with a renewal timer beside it, and logs how it ended. */
  const run = async (
    copyId: string,
    deletionId: string,
    epoch: number,
  ): Promise<DeletionRunResult> => {
    const renewal = new AbortController();
    const renewing = (async () => {
      while (!renewal.signal.aborted) {
        await clock.sleep(Math.max(50, Math.floor(leaseMs / 3)), renewal.signal);
        if (renewal.signal.aborted || !alive) break;
        await deletions.renew(deletionId, epoch, id, leaseMs).catch(() => undefined);
      }
    })();
    try {
      const result = await runDeletion({
        deletions,
        copies,
        copyId,
        deletionId,
        epoch,
        holder: id,
        leaseMs,
        alive: () => alive,
        ...(options.faults === undefined ? {} : { faults: options.faults }),
      });
      if (result.result === 'failed') {
        logger.log('WARNING', 'copy deletion kept members; an operator must review', {
          deleter: id,
          copyId,
          kept: result.kept,
          reasons: result.reasons,
        });
      } else if (result.result === 'deleted') {
        logger.log('INFO', 'copy deleted with a receipt', { deleter: id, copyId, ...result });
      } else if (alive) {
        logger.log('INFO', 'deleter stopped a deletion', { deleter: id, copyId, why: result.why });
      }
      return result;
    } finally {
      renewal.abort();
      await renewing;
    }
  };

  const schedule = async () => {
    const policy = await policies.get();
    for (const c of await deletions.eligible(policy, batch)) {
      if (!alive) return;
      try {
        await copies.apply(
          c.copyId,
          { type: 'SCHEDULE_DELETION' },
          {
            by: id,
            reason: `archived and verified by operation ${c.archiveOperationId}; the policy cleans ${c.locationType} copies ${policy.graceSeconds} s after the archive`,
          },
        );
      } catch (err) {
        if (!routine(err)) throw err;
        logger.log('DEBUG', 'deletion not scheduled', { copyId: c.copyId, error: messageOf(err) });
      }
    }
  };

  const startScheduled = async () => {
    for (const copy of await deletions.scheduled(batch)) {
      if (!alive) return;
      try {
        await rootIdentity(copy.storageRoot);
      } catch {
        continue; // not mounted here: another deleter plans it
      }
      try {
        const facts = await copies.facts(copy.id);
        const archive = facts.facts.archive;
        const archived =
          archive === null ? null : await deletions.archivedManifest(archive.operationId);
        if (archive === null || archived === null || facts.archiveObjectSha256 === null) {
          // The guard refuses START_DELETION with the reason; the copy stays scheduled.
          await copies.apply(copy.id, { type: 'START_DELETION' }, { by: id });
          continue;
        }
        const gone = new Set<string>();
        for (const earlier of await deletions.plansOf(copy.id)) {
          const loaded = await deletions.load(earlier.id);
          for (const m of loaded?.members ?? []) {
            if (m.outcome === 'DELETED' || m.outcome === 'MISSING') gone.add(m.path);
          }
        }
        const plan = await planDeletion({
          copy,
          archive: { ...archive, objectSha256: facts.archiveObjectSha256 },
          archived,
          alreadyGone: gone,
          holder: id,
          leaseMs,
        });
        if (!alive) return;
        const started = await copies.apply(
          copy.id,
          { type: 'START_DELETION' },
          { by: id, reason: `plan of ${plan.members.length} member(s) written`, plan },
        );
        await options.faults?.afterPlan?.({
          copyId: copy.id,
          deletionId: plan.deletionId,
          epoch: started.epoch ?? 1,
          path: plan.path,
        });
        await run(copy.id, plan.deletionId, started.epoch ?? 1);
      } catch (err) {
        if (!routine(err)) throw err;
        logger.log('DEBUG', 'deletion not started', { copyId: copy.id, error: messageOf(err) });
      }
    }
  };

  const resumeLapsed = async () => {
    for (const lapsed of await deletions.lapsed(batch)) {
      if (!alive) return;
      if (!(await here(lapsed))) continue;
      try {
        const taken = await copies.apply(
          lapsed.copyId,
          { type: 'RESUME_DELETION' },
          {
            by: id,
            reason: `the lease of ${lapsed.holder} ran out; resuming where it stood`,
            takeover: { holder: id, leaseMs },
          },
        );
        if (taken.status === PhysicalCopyStatus.DELETION_FAILED) {
          logger.log('WARNING', 'copy deletion interrupted too often; an operator must review', {
            deleter: id,
            copyId: lapsed.copyId,
            error: taken.context.lastError,
          });
          continue;
        }
        logger.log('INFO', 'deleter took over a deletion whose lease ran out', {
          deleter: id,
          copyId: lapsed.copyId,
          from: lapsed.holder,
          epoch: taken.epoch,
        });
        await run(lapsed.copyId, lapsed.deletionId, taken.epoch ?? 0);
      } catch (err) {
        if (!routine(err)) throw err;
        logger.log('DEBUG', 'takeover lost', { copyId: lapsed.copyId, error: messageOf(err) });
      }
    }
  };

  const loop = startLoop({
    name: `copy deleter ${id}`,
    intervalMs: options.intervalMs ?? 5_000,
    clock,
    logger,
    pass: async () => {
      if (!alive) return false;
      await schedule();
      await startScheduled();
      await resumeLapsed();
      return false;
    },
  });
  logger.log('INFO', 'copy deleter started', { deleter: id, leaseMs });

  return {
    id,
    wake: () => loop.wake(),
    async stop() {
      alive = false;
      await loop.stop();
    },
    async crash() {
      alive = false;
      await loop.stop();
      logger.log('WARNING', 'copy deleter crashed (drill)', { deleter: id });
    },
  };
}
