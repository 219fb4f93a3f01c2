import {
  ATTENTION_CATEGORIES,
  AttentionCategory,
  type AttentionItem,
  type AttentionOperationRow,
  type AttentionTiming,
  attentionCutoffs,
  classifyArchive,
  classifyBreaker,
  classifyCopy,
  classifyOperation,
  classifyQueue,
  classifyWaitingEntry,
  type HeartbeatFacts,
  withHold,
} from '../machines/attention.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { type QueueReaders, readersOf } from '../machines/queueReaders.ts';
import { queueName } from '../machines/routing.ts';
import type { Executor } from './openDatabase.ts';
import { selectFailedHolds } from './reads/selectFailedHolds.ts';
import { selectQueueDepths } from './reads/selectQueueDepths.ts';
import { selectWaitingEntries } from './reads/selectWaitingEntries.ts';
import {
  ATTENTION_COUNT_CAP,
  type AttentionCursor,
  countIndexed,
  countNearDeadline,
  countStuck,
  type HeartbeatIds,
  selectAttentionRow,
  selectBreakersNotClosed,
  selectFailed,
  selectNearDeadline,
  selectRetryCap,
  selectStuck,
} from './sql/selectAttention.ts';
import {
  countArchiveConflicts,
  countDeletionStalled,
  selectArchiveConflicts,
  selectDeletionFailed,
  selectDeletionStalled,
} from './sql/selectCopyAttention.ts';
import { isUuid } from './subtypeFields.ts';

export interface AttentionOptions {
  /** The time the rules measure against (ms). */
  readonly now: number;
  readonly timing: AttentionTiming;
  /** Latest heartbeat per operation id, or null when heartbeats are not visible from here. */
  readonly heartbeats: HeartbeatFacts;
  /**
   * Who reads each queue, from the same heartbeats (`queueReaders`). Absent or null: not known,
   * so a queue is judged by what live workers hold and how long its oldest dispatch has waited.
   */
  readonly readers?: QueueReaders | null;
  /** Items per category and page (default 50). */
  readonly limit?: number;
  /** Only this category, from `after` (a `next` token of an earlier page). */
  readonly category?: AttentionCategory;
  readonly after?: string;
}

/** One category of the attention list: its total, one page of items, and the next page's token. */
export interface AttentionSection {
  readonly category: AttentionCategory;
  /** How many items over all pages; at most `ATTENTION_COUNT_CAP`, see `totalCapped`. */
  readonly total: number;
  /** True when there are more than `total` (counting stops at the cap). */
  readonly totalCapped: boolean;
  readonly items: readonly AttentionItem[];
  /** Pass as `after` for the next page; null on the last page. */
  readonly next: string | null;
}

export interface AttentionList {
  /** When it was computed (ISO). */
  readonly at: string;
  /** False when heartbeats are not visible here: SCHEDULED and IN_PROGRESS are judged by the floor alone. */
  readonly heartbeatsVisible: boolean;
  readonly sections: readonly AttentionSection[];
}

interface Loaded {
  readonly items: AttentionItem[];
  readonly total: number;
  readonly next: string | null;
}

/** A page token: `<since ISO>,<id>` of the last row of a full page. */
function token(rows: readonly { since: Date; id: string }[], limit: number): string | null {
  const last = rows.at(-1);
  return rows.length < limit || last === undefined
    ? null
    : `${last.since.toISOString()},${last.id}`;
}

function parseToken(value: string | undefined): AttentionCursor | undefined {
  if (value === undefined || value === '') return undefined;
  const [since, id] = value.split(',');
  const at = Date.parse(since ?? '');
  if (Number.isNaN(at) || !isUuid(id)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `page token ${JSON.stringify(value)} is not one this list handed out; start from the first page`,
    );
  }
  return { since: new Date(at), id: id as string };
}

/** Splits the held attempts into those with a live heartbeat and those whose beats went stale. */
function heartbeatIds(facts: HeartbeatFacts, now: number, timeoutMs: number): HeartbeatIds | null {
  if (facts === null) return null;
  const alive: string[] = [];
  const stale: string[] = [];
  for (const [key, at] of facts) {
    const [id, attempt] = key.split(':');
    if (!isUuid(id) || !/^\d+$/.test(attempt ?? '')) continue;
    (now - at < timeoutMs ? alive : stale).push(key);
  }
  return { alive, stale };
}

/**
 * The attention list: what an operator must look at, by category, each category paged oldest
 * first. The queries select by the rules' own cut-offs through partial indexes, and every row
 * goes through the pure rules (`classifyOperation`, `classifyQueue`, `classifyBreaker`,
 * `classifyCopy`; deadlines are the `timing`'s), so the
 * dashboard and `opstate status` show the same list.
 *
 * @example
 * ```ts
 * const list = await loadAttention(database, { now: clock.now(), timing: runtime.timing, heartbeats: null });
 * for (const s of list.sections) console.log(s.category, s.total);
 * ```
 */
export async function loadAttention(
  exec: Executor,
  options: AttentionOptions,
): Promise<AttentionList> {
  const { now, timing } = options;
  const limit = Math.max(1, Math.min(500, Math.floor(options.limit ?? 50)));
  if (options.category !== undefined && !ATTENTION_CATEGORIES.includes(options.category)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `unknown attention category ${JSON.stringify(options.category)}; use one of ${ATTENTION_CATEGORIES.join(', ')}`,
    );
  }
  const after = options.category === undefined ? undefined : parseToken(options.after);
  const wanted = options.category === undefined ? ATTENTION_CATEGORIES : [options.category];
  const cutoffs = attentionCutoffs(now, timing);
  const beats = heartbeatIds(options.heartbeats, now, timing.heartbeatTimeoutMs);
  const facts = { now, timing, heartbeats: options.heartbeats };
  const page = { limit, after };

  const nonNull = (items: (AttentionItem | null)[]) =>
    items.filter((i): i is AttentionItem => i !== null);
  const ofOperations = (category: AttentionCategory, rows: AttentionOperationRow[]) =>
    rows.flatMap((r) => classifyOperation(r, facts)).filter((i) => i.category === category);

  // One loader per category: a page of rows through the rules, the total, the next page's token.
  const counts = await countIndexed(exec);
  const loaders: Record<AttentionCategory, () => Promise<Loaded>> = {
    [AttentionCategory.STUCK]: async () => {
      const rows = await selectStuck(exec, cutoffs, beats, page);
      return {
        items: ofOperations(AttentionCategory.STUCK, rows),
        total: await countStuck(exec, cutoffs, beats),
        next: token(rows, limit),
      };
    },
    [AttentionCategory.DEADLINE]: async () => {
      const at = new Date(now);
      const rows = await selectNearDeadline(exec, at, timing.deadlines, page);
      return {
        items: ofOperations(AttentionCategory.DEADLINE, rows),
        total: await countNearDeadline(exec, at, timing.deadlines),
        next: token(rows, limit),
      };
    },
    [AttentionCategory.QUEUE_UNSERVED]: async () => {
      // Judged only where heartbeats are visible: the rule needs to know who is alive.
      if (beats === null) return { items: [], total: 0, next: null };
      const serving = beats.alive.map((key) => key.split(':')[0] as string);
      const queues = await selectQueueDepths(exec, serving);
      const readers = options.readers ?? null;
      const items = nonNull(
        queues.map((q) =>
          classifyQueue({ ...q, ...readersOf(readers, queueName(q.route)) }, facts),
        ),
      );
      return { items, total: items.length, next: null };
    },
    [AttentionCategory.RETRY_CAP]: async () => {
      const rows = await selectRetryCap(exec, page);
      const items = ofOperations(AttentionCategory.RETRY_CAP, rows);
      return { items, total: counts[AttentionCategory.RETRY_CAP], next: token(rows, limit) };
    },
    [AttentionCategory.FAILED]: async () => {
      const rows = await selectFailed(exec, page);
      const holds = await selectFailedHolds(
        exec,
        rows.map((r) => r.id),
      );
      const items = ofOperations(AttentionCategory.FAILED, rows).map((i) => {
        const hold = holds.get(i.subject.id);
        return hold === undefined ? i : withHold(i, hold);
      });
      return { items, total: counts[AttentionCategory.FAILED], next: token(rows, limit) };
    },
    [AttentionCategory.BREAKER_OPEN]: async () => {
      const items = nonNull((await selectBreakersNotClosed(exec)).map(classifyBreaker));
      return { items, total: items.length, next: null };
    },
    [AttentionCategory.ARCHIVE_CONFLICT]: async () => {
      const rows = await selectArchiveConflicts(exec, page);
      return {
        items: nonNull(rows.map(classifyArchive)),
        total: await countArchiveConflicts(exec),
        next: token(
          rows.map((r) => ({ since: r.since, id: r.operationId })),
          limit,
        ),
      };
    },
    [AttentionCategory.DELETION_FAILED]: async () => {
      const rows = await selectDeletionFailed(exec, page);
      const items = nonNull(rows.map((r) => classifyCopy(r, facts)));
      return { items, total: counts[AttentionCategory.DELETION_FAILED], next: token(rows, limit) };
    },
    [AttentionCategory.DELETION_STALLED]: async () => {
      const rows = await selectDeletionStalled(exec, cutoffs.heartbeatCutoff, page);
      return {
        items: nonNull(rows.map((r) => classifyCopy(r, facts))),
        total: await countDeletionStalled(exec, cutoffs.heartbeatCutoff),
        next: token(rows, limit),
      };
    },
    [AttentionCategory.ENTRY_WAITING]: async () => {
      const { rows, total } = await selectWaitingEntries(exec, page);
      return { items: rows.map(classifyWaitingEntry), total, next: token(rows, limit) };
    },
  };
  const sections = await Promise.all(
    wanted.map(async (category): Promise<AttentionSection> => {
      const { items, total, next } = await loaders[category]();
      return {
        category,
        total: Math.min(total, ATTENTION_COUNT_CAP),
        totalCapped: total > ATTENTION_COUNT_CAP,
        items,
        next,
      };
    }),
  );
  return {
    at: new Date(now).toISOString(),
    heartbeatsVisible: options.heartbeats !== null,
    sections,
  };
}

/**
 * The row the attention rules judge one operation by (`classifyOperation`): status, attempt,
 * retries, since when, worker, last error, deadline and whether a breaker parks it; undefined
 * when there is no such operation. The operation page asks it; `loadAttention` pages through
 * every operation.
 *
 * @example
 * ```ts
 * const row = await loadAttentionRow(database, id);
 * const items = row === undefined ? [] : classifyOperation(row, { now: clock.now(), timing, heartbeats: null });
 * ```
 */
export async function loadAttentionRow(
  exec: Executor,
  operationId: string,
): Promise<AttentionOperationRow | undefined> {
  return selectAttentionRow(exec, operationId);
}
