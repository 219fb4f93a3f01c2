import {
  type AttentionCategory,
  type AttentionItem,
  type AttentionTiming,
  classifyOperation,
  classifyQueue,
  type HeartbeatFacts,
  heartbeatFacts,
  kindsOfQueue,
} from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import { classifyPackageStep } from '../machines/classifyPackageStep.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OperationStatus } from '../machines/operationMachine.ts';
import type { PackageState } from '../machines/packageState.ts';
import type { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import { type QueueReaders, queueReaders, readersOf } from '../machines/queueReaders.ts';
import { allRoutes, OPERATION_TYPES_IN_USE, queueName, routesAt } from '../machines/routing.ts';
import { checkId } from '../persistence/applyEvents.ts';
import { inspectOperation } from '../persistence/inspectOperation.ts';
import {
  type AttentionSection,
  loadAttention,
  loadAttentionRow,
} from '../persistence/loadAttention.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { countPackageStates } from '../persistence/reads/countPackageStates.ts';
import { listPackagesInState } from '../persistence/reads/listPackagesInState.ts';
import {
  type OperationSearch,
  type OperationSearchRow,
  searchOperations,
} from '../persistence/reads/searchOperations.ts';
import { selectCopies } from '../persistence/reads/selectCopies.ts';
import { selectCopyStatus } from '../persistence/reads/selectCopyStatus.ts';
import { selectDeletions } from '../persistence/reads/selectDeletions.ts';
import { selectFlowLimitLoad } from '../persistence/reads/selectFlowLimitLoad.ts';
import { selectLineage } from '../persistence/reads/selectLineage.ts';
import { selectPackage } from '../persistence/reads/selectPackage.ts';
import { type QueueDepth, selectQueueDepths } from '../persistence/reads/selectQueueDepths.ts';
import { selectLocationsAt } from '../persistence/reads/selectRoutedLocations.ts';
import { selectRoutesOf } from '../persistence/reads/selectRoutesOf.ts';
import { selectStatusCounts } from '../persistence/reads/selectStatusCounts.ts';
import { loadResumeRecord } from '../persistence/resumeRecord.ts';
import { isUuid } from '../persistence/subtypeFields.ts';
import type { Heartbeats, WorkerHeartbeat } from '../transport/Transport.ts';
import type { CopiesPageData } from './copiesPage.ts';
import { idleUnserved } from './idleUnserved.ts';
import type { OperationPageData } from './operationPage.ts';
import type { OverviewData } from './overviewPage.ts';
import type { PackagePageData } from './packagePage.ts';
import type { PackagesPageData } from './packagesPage.ts';
import type { QueueView, WorkersPageData, WorkerView } from './workersPage.ts';

/** Rows per page, in every list. */
export const PAGE_SIZE = 50;

/** The ids of the operations that workers with a live heartbeat hold. */
function servingIds(all: readonly WorkerHeartbeat[], now: number, timeoutMs: number): string[] {
  return all
    .filter((b) => now - b.at < timeoutMs)
    .flatMap((b) => b.held.map((h) => h.operationId))
    .filter(isUuid);
}

/** Splits a page token `<ISO time>,<uuid>` (handed out by an earlier page). */
function timeAndId(after: string | null): { at: Date; id: string } | undefined {
  if (after === null || after === '') return undefined;
  const [at, id] = after.split(',');
  const time = new Date(at ?? '');
  if (Number.isNaN(time.getTime()) || !isUuid(id)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'after must be a token from a previous page; start from the first page',
    );
  }
  return { at: time, id };
}

/** Splits a page token `<artifact id>,<copy id>` of the copies list. */
function copyCursor(after: string | null): { artifactId: string; id: string } | undefined {
  if (after === null || after === '') return undefined;
  const [artifactId, id] = after.split(',');
  if (!isUuid(artifactId) || !isUuid(id)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'copiesAfter must be a token from a previous page; start from the first page',
    );
  }
  return { artifactId, id };
}

/** How long one listing of the heartbeat store serves the pages asked for. */
const HEARTBEATS_MAX_AGE_MS = 1_000;

export interface DashboardDataOptions {
  readonly database: Database;
  readonly timing: AttentionTiming;
  readonly heartbeats: Heartbeats | null;
  readonly clock: Clock;
}

/**
 * What the dashboard's pages show, read from the database (every query paged and indexed) and
 * the heartbeat store. Counts per kind × status are read afresh on every page: they are summed
 * from the tally the database keeps (a few dozen rows), which costs less than asking whether
 * anything changed.
 *
 * @example
 * ```ts
 * const data = createDashboardData({ database, timing, heartbeats: null, clock });
 * const { counts, attention } = await data.overview();
 * ```
 */
export function createDashboardData(options: DashboardDataOptions) {
  const { database, timing, clock } = options;

  // Listing heartbeats reads every key of the store (O(active)): one listing serves every page
  // asked for within a second.
  let listed: { at: number; all: Promise<WorkerHeartbeat[]> } | undefined;
  const heartbeats = async (): Promise<{
    facts: HeartbeatFacts;
    readers: QueueReaders | null;
    all: WorkerHeartbeat[];
  }> => {
    const store = options.heartbeats;
    if (store === null) return { facts: null, readers: null, all: [] };
    const now = clock.now();
    if (listed === undefined || now - listed.at >= HEARTBEATS_MAX_AGE_MS) {
      const all = store.list();
      listed = { at: now, all };
      all.catch(() => {
        if (listed?.all === all) listed = undefined;
      });
    }
    const all = await listed.all;
    return {
      facts: heartbeatFacts(all),
      readers: queueReaders(all, clock.now(), timing.heartbeatTimeoutMs),
      all,
    };
  };

  /**
   * Changes when an operation or a copy moves, an archive records a step or a breaker changes
   * (four index lookups).
   */
  const changeMark = async (): Promise<string> => {
    const [row] = await database.execute(
      `select (select coalesce(max(id), 0) from operation_transition) as t,
        (select coalesce(max(id), 0) from physical_copy_transition) as c,
        (select coalesce(max(id), 0) from archive_record) as a,
        (select coalesce(max(updated_at)::text, '') from circuit_breaker) as b`,
    );
    return `${row?.t}|${row?.c}|${row?.a}|${row?.b}`;
  };

  return {
    changeMark,

    async overview(): Promise<OverviewData> {
      const { facts, readers } = await heartbeats();
      const [statusCounts, attention] = await Promise.all([
        selectStatusCounts(database),
        loadAttention(database, {
          now: clock.now(),
          timing,
          heartbeats: facts,
          readers,
          limit: PAGE_SIZE,
        }),
      ]);
      return { counts: statusCounts, attention };
    },

    async attention(category: string, after: string | undefined): Promise<AttentionSection> {
      const { facts, readers } = await heartbeats();
      const list = await loadAttention(database, {
        now: clock.now(),
        timing,
        heartbeats: facts,
        readers,
        limit: PAGE_SIZE,
        category: category as AttentionCategory,
        after,
      });
      return list.sections[0] as AttentionSection;
    },

    async operation(id: string): Promise<Omit<OperationPageData, 'allowActions'>> {
      checkId(id);
      const { facts, readers, all } = await heartbeats();
      const [view, up, down, row] = await Promise.all([
        inspectOperation(database, id),
        selectLineage(database, id, 'up'),
        selectLineage(database, id, 'down'),
        loadAttentionRow(database, id),
      ]);
      // A long-term archive's resume record: archive and source identity, deletion progress.
      const resume = (await loadResumeRecord(database, view)) ?? null;
      // The newest heartbeat of a worker holding its current attempt.
      const mine = all
        .filter((b) => b.held.some((h) => h.operationId === id && h.attempt === view.attempt))
        .sort((a, b) => b.at - a.at)[0];
      const heartbeat =
        options.heartbeats === null
          ? null
          : mine === undefined
            ? ('none' as const)
            : { at: mine.at, workerId: mine.workerId };
      const now = clock.now();
      const attention: AttentionItem[] =
        row === undefined ? [] : classifyOperation(row, { now, timing, heartbeats: facts });
      // Waiting in its queue: is anyone serving the queue?
      if (view.status === OperationStatus.SCHEDULED && facts !== null) {
        const queues = await selectQueueDepths(
          database,
          servingIds(all, now, timing.heartbeatTimeoutMs),
        );
        const mine = queues.find((q) => queueName(q.route) === view.queue);
        const item =
          mine === undefined
            ? null
            : classifyQueue(
                { ...mine, ...readersOf(readers, view.queue) },
                { now, timing, heartbeats: facts },
              );
        if (item !== null) attention.push(item);
      }
      return { view, up, down, heartbeat, attention, resume };
    },

    /** One package, its derived state and step; `NOT_FOUND` when no package has that id. */
    async package(id: string): Promise<PackagePageData> {
      const record = await selectPackage(database, id);
      if (record === undefined) {
        throw new OpstateError(
          OpstateErrorCode.NOT_FOUND,
          `no raw data package or data transfer package has id ${id}`,
        );
      }
      return { record, step: classifyPackageStep(record.facts, clock.now()) };
    },

    /** The packages per derived state, and one page of those in `state` (all when undefined). */
    async packages(
      state: PackageState | undefined,
      after: string | null,
    ): Promise<PackagesPageData> {
      const [counts, page] = await Promise.all([
        countPackageStates(database),
        listPackagesInState(database, state ?? null, { limit: PAGE_SIZE, after }),
      ]);
      return { counts, state, rows: page.rows, next: page.next };
    },

    /**
     * One page of the operations matching a search, newest first, and the token of the next page
     * (null on the last).
     */
    async operations(
      search: OperationSearch,
      after: string | null,
    ): Promise<{ rows: OperationSearchRow[]; next: string | null }> {
      const cursor = timeAndId(after);
      const rows = await searchOperations(database, search, {
        limit: PAGE_SIZE,
        after: cursor === undefined ? undefined : { createdAt: cursor.at, id: cursor.id },
      });
      const last = rows.at(-1);
      const next =
        rows.length === PAGE_SIZE && last !== undefined
          ? `${last.createdAt.toISOString()},${last.id}`
          : null;
      return { rows, next };
    },

    /**
     * Every routing queue (the legacy ones, every registered location's site queues, and any other
     * with work or a reader) with its live work and the workers serving it (those whose heartbeat
     * says they read it, idle ones included, and those of an older version that hold work from
     * it), and every worker with the queues it reads.
     */
    async workers(): Promise<WorkersPageData> {
      const now = clock.now();
      const { facts, readers, all } = await heartbeats();
      const live = (b: WorkerHeartbeat) => now - b.at < timing.heartbeatTimeoutMs;
      const heldIds = [...new Set(all.flatMap((b) => b.held.map((h) => h.operationId)))].filter(
        isUuid,
      );
      const [depths, routes, locations, limits] = await Promise.all([
        selectQueueDepths(database, servingIds(all, now, timing.heartbeatTimeoutMs)),
        selectRoutesOf(database, heldIds),
        selectLocationsAt(database),
        selectFlowLimitLoad(database),
      ]);
      const queueOf = (operationId: string) => {
        const r = routes.get(operationId);
        return r === undefined ? null : queueName(r.route);
      };
      const workers: WorkerView[] = [...all]
        .sort((a, b) => a.workerId.localeCompare(b.workerId))
        .map((b) => ({
          workerId: b.workerId,
          at: b.at,
          live: live(b),
          queues: b.reads?.queues ?? null,
          kinds: b.reads?.kinds ?? null,
          held: b.held.map((h) => ({
            operationId: h.operationId,
            kind: h.kind,
            attempt: h.attempt,
            queue: queueOf(h.operationId),
            status: routes.get(h.operationId)?.status ?? null,
          })),
        }));
      const byQueue = new Map<string, QueueDepth>(depths.map((d) => [queueName(d.route), d]));
      const read = all.flatMap((b) => b.reads?.queues ?? []);
      const names = [
        ...new Set([
          ...allRoutes().map(queueName),
          ...routesAt(locations, OPERATION_TYPES_IN_USE).map(queueName),
          ...byQueue.keys(),
          ...read,
        ]),
      ].sort();
      const queues: QueueView[] = names.map((queue) => {
        const depth = byQueue.get(queue);
        // Who reads it, by what each heartbeat says; an older one's by what it holds.
        const serving = workers.filter((w) =>
          w.queues === null ? w.held.some((h) => h.queue === queue) : w.queues.includes(queue),
        );
        return {
          queue,
          kinds: kindsOfQueue(queue),
          waiting: depth?.waiting ?? 0,
          inProgress: depth?.inProgress ?? 0,
          oldestWaiting: depth?.oldestWaiting ?? null,
          liveWorkers: serving
            .filter((w) => w.live)
            .map((w) => ({ workerId: w.workerId, reads: w.queues !== null })),
          staleWorkers: serving.filter((w) => !w.live).map((w) => w.workerId),
          attention:
            depth === undefined
              ? null
              : classifyQueue(
                  { ...depth, ...readersOf(readers, queue) },
                  { now, timing, heartbeats: facts },
                ),
        };
      });
      return {
        at: new Date(now).toISOString(),
        heartbeatsVisible: options.heartbeats !== null,
        heartbeatTimeoutMs: timing.heartbeatTimeoutMs,
        queues,
        workers,
        limits,
        idleUnserved: options.heartbeats === null ? [] : idleUnserved(locations, queues),
      };
    },

    /** One page of copies (by artifact) and one of deletions, each newest first. */
    async copies(filter: {
      status?: PhysicalCopyStatus | undefined;
      text?: string | undefined;
      copiesAfter: string | null;
      deletionsAfter: string | null;
    }): Promise<Omit<CopiesPageData, 'filter'>> {
      const copiesCursor = copyCursor(filter.copiesAfter);
      if (filter.deletionsAfter !== null && !isUuid(filter.deletionsAfter)) {
        throw new OpstateError(
          OpstateErrorCode.BAD_INPUT,
          'deletionsAfter must be a token from a previous page; start from the first page',
        );
      }
      const [summary, copies, deletions] = await Promise.all([
        selectCopyStatus(database),
        selectCopies(
          database,
          { status: filter.status, text: filter.text },
          { limit: PAGE_SIZE, after: copiesCursor },
        ),
        selectDeletions(database, {
          limit: PAGE_SIZE,
          after: filter.deletionsAfter ?? undefined,
        }),
      ]);
      const lastCopy = copies.at(-1);
      const lastDeletion = deletions.at(-1);
      return {
        counts: summary.copies,
        copies,
        copiesNext:
          copies.length === PAGE_SIZE && lastCopy !== undefined
            ? `${lastCopy.artifactId},${lastCopy.id}`
            : null,
        deletions,
        deletionsNext:
          deletions.length === PAGE_SIZE && lastDeletion !== undefined
            ? lastDeletion.deletionId
            : null,
      };
    },
  };
}

export type DashboardData = ReturnType<typeof createDashboardData>;
