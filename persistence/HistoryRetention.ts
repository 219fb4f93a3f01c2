import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { JournalMaintenance } from './JournalRetention.ts';
import { toDate } from './OperationRecord.ts';
import type { Executor, Row } from './openDatabase.ts';

/** The shortest retention a policy may set: a day (the database refuses less, too). */
export const MIN_KEEP_MS = 86_400_000;

/** The narrowest partition a policy may ask for, in ids (the database refuses less, too). */
export const MIN_PARTITION_IDS = 1_000;

/** The widest span of the journal a policy may ask for, in days (the database refuses more). */
export const MAX_JOURNAL_DAYS = 3_660;

/** The retention policy of the transition history. */
export interface RetentionPolicy {
  /** How long a transition is kept at least; null: kept for ever (the default). */
  readonly keepMs: number | null;
  /** How many ids each partition made from now on spans. */
  readonly partitionIds: number;
  /** How many days of operations created each span of the journal made from now on holds. */
  readonly journalDays: number;
  /**
   * Every operation id below this had its step journal and failure breadcrumbs dropped by the
   * policy (null: none dropped yet); such a FAILED operation is retried only with a new plan.
   */
  readonly journalPrunedBelow: string | null;
  /** When the journal was last pruned. */
  readonly journalPrunedAt: Date | null;
  readonly setBy: string;
  readonly setAt: Date;
}

/** One partition of the transition history. */
export interface HistoryPartition {
  readonly name: string;
  /** The lowest id it holds; null: unbounded below (the history from before partitioning). */
  readonly lowerId: number | null;
  /** One past the highest id it holds; null for the default partition. */
  readonly upperId: number | null;
  /** The default partition: rows past every partition made ahead (it should stay empty). */
  readonly isDefault: boolean;
  /** Its rows as Postgres last estimated them (`reltuples`; -1 before its first analyze). */
  readonly estimatedRows: number;
}

/** What pruning found about one partition it looked at. */
export interface PruneStep {
  readonly name: string;
  readonly lowerId: number | null;
  readonly upperId: number | null;
  /** Its rows when counted (null when its newest row alone showed it too young). */
  readonly rows: number | null;
  readonly newest: Date | null;
  readonly dropped: boolean;
  readonly reason: string;
}

/** A pruning: the partitions dropped, and the one that stopped it or was stepped over. */
export interface PruneResult {
  readonly dropped: readonly PruneStep[];
  readonly kept: readonly PruneStep[];
}

/** What one pass of the leader's care of the history did and found. */
export interface HistoryMaintenance extends PruneResult {
  /** Partitions made ahead of the ids. */
  readonly made: number;
  /** Rows in the default partition: written when no partition had been made for their ids. */
  readonly spilled: number;
  /** The same for the step journal and failure breadcrumbs (`JournalRetentionRepository`). */
  readonly journal: JournalMaintenance;
}

function bad(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message);
}

const num = (v: unknown): number | null => (v == null ? null : Number(v));

function toStep(r: Row): PruneStep {
  return {
    name: String(r.name),
    lowerId: num(r.lower_id),
    upperId: num(r.upper_id),
    rows: num(r.rows_in),
    newest: toDate(r.newest) ?? null,
    dropped: r.dropped === true,
    reason: String(r.reason),
  };
}

/**
 * The transition history's partitions and retention policy. The history is partitioned by ranges
 * of its id; the control plane's leader makes partitions ahead of the ids (`extend`) and, when a
 * policy keeps less than everything, drops whole partitions that the policy lets go (`prune`):
 * only one that is whole, entirely older than `keepMs`, passed by every pipeline's cursor and the
 * dispatch relay's, and holding no row of a PENDING, SCHEDULED or IN_PROGRESS operation (checked
 * under a lock that no status change can pass). Lineage, archive records and deletions live in
 * other tables and are never pruned. Bad input is refused with `BAD_INPUT` and changes nothing.
 *
 * @example
 * ```ts
 * const retention = new HistoryRetentionRepository(database);
 * await retention.set({ keepMs: 400 * 86_400_000, by: 'ops' });
 * const { dropped } = await retention.prune();
 * ```
 */
export class HistoryRetentionRepository {
  readonly #exec: Executor;

  constructor(exec: Executor) {
    this.#exec = exec;
  }

  /** The policy in force. */
  async policy(): Promise<RetentionPolicy> {
    const [r] = await this.#exec.execute(
      `select (extract(epoch from keep) * 1000)::bigint as keep_ms, partition_ids, journal_days,
              journal_pruned_below::text, journal_pruned_at, set_by, set_at
         from history_retention where id = 1`,
    );
    if (r === undefined) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        'history_retention has no row: the schema was changed by hand; run `opstate migrate`',
      );
    }
    return {
      keepMs: num(r.keep_ms),
      partitionIds: Number(r.partition_ids),
      journalDays: Number(r.journal_days),
      journalPrunedBelow: r.journal_pruned_below == null ? null : String(r.journal_pruned_below),
      journalPrunedAt: toDate(r.journal_pruned_at) ?? null,
      setBy: String(r.set_by),
      setAt: toDate(r.set_at) as Date,
    };
  }

  /**
   * Sets the policy: `keepMs` (null keeps everything) and, when given, the width of partitions made
   * from now on, of the history (`partitionIds`) and of the journal (`journalDays`). Refused: a
   * keep under a day, a width under `MIN_PARTITION_IDS` or not whole, a journal span that is not
   * a whole number of days from 1 to `MAX_JOURNAL_DAYS`.
   */
  async set(input: {
    readonly keepMs: number | null;
    readonly partitionIds?: number;
    readonly journalDays?: number;
    readonly by?: string;
  }): Promise<RetentionPolicy> {
    const { keepMs, partitionIds, journalDays } = input;
    if (
      journalDays !== undefined &&
      (!Number.isSafeInteger(journalDays) || journalDays < 1 || journalDays > MAX_JOURNAL_DAYS)
    ) {
      throw bad(
        `a span of the journal holds a whole number of days, 1 to ${MAX_JOURNAL_DAYS}; got ${JSON.stringify(journalDays)}`,
      );
    }
    if (keepMs !== null && (!Number.isSafeInteger(keepMs) || keepMs < MIN_KEEP_MS)) {
      throw bad(
        `a retention keeps the history at least a day (e.g. 400d), or for ever; got ${JSON.stringify(keepMs)} ms`,
      );
    }
    if (
      partitionIds !== undefined &&
      (!Number.isSafeInteger(partitionIds) || partitionIds < MIN_PARTITION_IDS)
    ) {
      throw bad(
        `a partition spans a whole number of ids, at least ${MIN_PARTITION_IDS}; got ${JSON.stringify(partitionIds)}`,
      );
    }
    const by = input.by ?? 'operator';
    // Whole days and the rest in seconds: '400 days', never a month, whose length varies.
    const days = keepMs === null ? 0 : Math.floor(keepMs / MIN_KEEP_MS);
    const keep =
      keepMs === null
        ? sql`null`
        : sql`make_interval(days => ${days}::int, secs => ${(keepMs - days * MIN_KEEP_MS) / 1000}::float8)`;
    await this.#exec.execute(
      sql`update history_retention
             set keep = ${keep}, partition_ids = coalesce(${partitionIds ?? null}::bigint, partition_ids),
                 journal_days = coalesce(${journalDays ?? null}::int, journal_days),
                 set_by = ${by}, set_at = now()
           where id = 1`,
    );
    return this.policy();
  }

  /** The partitions, lowest ids first, the default partition last. */
  async partitions(): Promise<HistoryPartition[]> {
    const rows = await this.#exec.execute(
      `select h.*, c.reltuples::bigint as estimated_rows
         from opstate_history_partitions() h join pg_class c on c.oid = to_regclass(quote_ident(h.name))`,
    );
    return rows.map((r) => ({
      name: String(r.name),
      lowerId: num(r.lower_id),
      upperId: num(r.upper_id),
      isDefault: r.is_default === true,
      estimatedRows: Number(r.estimated_rows),
    }));
  }

  /** Rows in the default partition (there only when the leader did not make partitions in time). */
  async spilled(): Promise<number> {
    const [r] = await this.#exec.execute('select opstate_history_spilled() as n');
    return Number(r?.n ?? 0);
  }

  /** Makes partitions until `ahead` whole ones lie past the next id; returns how many it made. */
  async extend(ahead = 2): Promise<number> {
    const [r] = await this.#exec.execute(sql`select opstate_history_extend(${ahead}::int) as made`);
    return Number(r?.made ?? 0);
  }

  /**
   * Drops every partition the policy lets go, oldest first, one per statement (so the history's
   * lock is held for one partition at a time), and reports the partitions it kept on the way.
   */
  async prune(now?: Date): Promise<PruneResult> {
    const dropped: PruneStep[] = [];
    let kept: PruneStep[] = [];
    for (;;) {
      const at = now === undefined ? sql`now()` : sql`${now.toISOString()}::timestamptz`;
      const rows = await this.#exec.execute(sql`select * from opstate_history_prune(${at})`);
      const steps = rows.map(toStep);
      kept = steps.filter((s) => !s.dropped);
      const gone = steps.filter((s) => s.dropped);
      if (gone.length === 0) return { dropped, kept };
      dropped.push(...gone);
    }
  }
}
