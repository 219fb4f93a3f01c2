import {
  type AttentionCategory,
  type AttentionTiming,
  classifyOperation,
  type HeartbeatFacts,
  heartbeatFacts,
} from '../machines/attention.ts';
import type { Clock } from '../machines/Clock.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import { checkId } from '../persistence/applyEvents.ts';
import { inspectOperation } from '../persistence/inspectOperation.ts';
import { type AttentionSection, loadAttention } from '../persistence/loadAttention.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { loadResumeRecord } from '../persistence/resumeRecord.ts';
import { selectStatusCounts } from '../persistence/sql/controlPlaneQueries.ts';
import { selectAttentionRow } from '../persistence/sql/selectAttention.ts';
import { selectLineage } from '../persistence/sql/selectLineage.ts';
import {
  type OperationListRow,
  selectOperationList,
} from '../persistence/sql/selectOperationList.ts';
import type { Heartbeats, WorkerHeartbeat } from '../transport/Transport.ts';
import type { OperationPageData } from './operationPage.ts';
import type { OverviewData } from './overviewPage.ts';

/** Rows per page, in every list. */
export const PAGE_SIZE = 50;

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
  const heartbeats = async (): Promise<{ facts: HeartbeatFacts; all: WorkerHeartbeat[] }> => {
    const store = options.heartbeats;
    if (store === null) return { facts: null, all: [] };
    const now = clock.now();
    if (listed === undefined || now - listed.at >= HEARTBEATS_MAX_AGE_MS) {
      const all = store.list();
      listed = { at: now, all };
      all.catch(() => {
        if (listed?.all === all) listed = undefined;
      });
    }
    const all = await listed.all;
    return { facts: heartbeatFacts(all), all };
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
      const { facts } = await heartbeats();
      const [statusCounts, attention] = await Promise.all([
        selectStatusCounts(database),
        loadAttention(database, { now: clock.now(), timing, heartbeats: facts, limit: PAGE_SIZE }),
      ]);
      return { counts: statusCounts, attention };
    },

    async attention(category: string, after: string | undefined): Promise<AttentionSection> {
      const { facts } = await heartbeats();
      const list = await loadAttention(database, {
        now: clock.now(),
        timing,
        heartbeats: facts,
        limit: PAGE_SIZE,
        category: category as AttentionCategory,
        after,
      });
      return list.sections[0] as AttentionSection;
    },

    async operation(id: string): Promise<Omit<OperationPageData, 'allowActions'>> {
      checkId(id);
      const { facts, all } = await heartbeats();
      const [view, up, down, row] = await Promise.all([
        inspectOperation(database, id),
        selectLineage(database, id, 'up'),
        selectLineage(database, id, 'down'),
        selectAttentionRow(database, id),
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
      const attention =
        row === undefined
          ? []
          : classifyOperation(row, { now: clock.now(), timing, heartbeats: facts });
      return { view, up, down, heartbeat, attention, resume };
    },

    /** One page of a kind and status, and the token of the next page (null on the last). */
    async operations(
      kind: OperationKind,
      status: OperationStatus,
      after: string | null,
    ): Promise<{ rows: OperationListRow[]; next: string | null }> {
      let cursor: { createdAt: Date; id: string } | undefined;
      if (after !== null) {
        const [at, id] = after.split(',');
        cursor = { createdAt: new Date(at ?? ''), id: checkId(id) };
        if (Number.isNaN(cursor.createdAt.getTime())) {
          throw new OpstateError(
            OpstateErrorCode.BAD_INPUT,
            'after must be a token from a previous page',
          );
        }
      }
      const rows = await selectOperationList(
        database,
        { kind, status },
        { limit: PAGE_SIZE, after: cursor },
      );
      const last = rows.at(-1);
      const next =
        rows.length === PAGE_SIZE && last !== undefined
          ? `${last.createdAt.toISOString()},${last.id}`
          : null;
      return { rows, next };
    },
  };
}

export type DashboardData = ReturnType<typeof createDashboardData>;
