import { sql } from 'drizzle-orm';
import { toDate } from './OperationRecord.ts';
import type { Executor, Row } from './openDatabase.ts';

/**
 * One span of the journal: a partition of the step journal and one of the failure breadcrumbs,
 * with the same suffix and bounds, holding the rows of the operations whose ids fall between them.
 * Operation ids are time-ordered, so a span is a stretch of days of operations created.
 */
export interface JournalSpan {
  /** `j0` (everything written before partitioning), `jYYYYMMDD` (its first day), or `default`. */
  readonly suffix: string;
  /** The lowest operation id it holds; null: unbounded below (the first span). */
  readonly lowerId: string | null;
  /** The first operation id past it; null for the default partitions. */
  readonly upperId: string | null;
  /** The default partitions: rows of operations past every span made (they should stay empty). */
  readonly isDefault: boolean;
  /** Rows of both partitions as Postgres last estimated them (-1 before their first analyze). */
  readonly estimatedRows: number;
}

/** What pruning found about one span it looked at. */
export interface JournalPruneStep {
  readonly suffix: string;
  readonly lowerId: string | null;
  readonly upperId: string | null;
  /** Steps and breadcrumbs in it when counted (null when it was not read). */
  readonly rows: number | null;
  readonly newest: Date | null;
  readonly dropped: boolean;
  readonly reason: string;
}

/** One pass of the leader's care of the journal. */
export interface JournalMaintenance {
  /** Spans made ahead. */
  readonly made: number;
  /** Rows in the default partitions. */
  readonly spilled: number;
  readonly dropped: readonly JournalPruneStep[];
  /** The span that stopped the pruning, if one was looked at. */
  readonly kept: readonly JournalPruneStep[];
}

const text = (v: unknown): string | null => (v == null ? null : String(v));
const num = (v: unknown): number | null => (v == null ? null : Number(v));

function toStep(r: Row): JournalPruneStep {
  return {
    suffix: String(r.suffix),
    lowerId: text(r.lower_id),
    upperId: text(r.upper_id),
    rows: num(r.rows_in),
    newest: toDate(r.newest) ?? null,
    dropped: r.dropped === true,
    reason: String(r.reason),
  };
}

/**
 * The step journal's and failure breadcrumbs' partitions (migration 0024), by ranges of their
 * operation's id, `journalDays` of operations created per span. The control plane's leader makes
 * spans ahead of the server's clock (`extend`) and, under a retention policy
 * (`HistoryRetentionRepository.set`), drops whole spans oldest first (`prune`): only one whose
 * every operation was created before `now - keep`, whose every row is older than that, and whose
 * operations are all finished, checked again under a lock no status change passes. Below the
 * last span dropped, a FAILED operation is retried only with a new plan (`opstate retry <id>
 * --replan`): the database refuses a plain RETRY, since the next attempt would take again the
 * steps it no longer finds. The re-plans, the operations, lineage, copies, archive records and
 * deletions are never pruned.
 *
 * @example
 * ```ts
 * const journal = new JournalRetentionRepository(database);
 * await journal.extend();
 * const { dropped } = await journal.prune();
 * ```
 */
export class JournalRetentionRepository {
  readonly #exec: Executor;

  constructor(exec: Executor) {
    this.#exec = exec;
  }

  /** The spans, lowest first, the default partitions last. */
  async spans(): Promise<JournalSpan[]> {
    const rows = await this.#exec.execute(
      `select j.suffix, j.lower_id::text, j.upper_id::text, j.is_default,
              (s.reltuples + f.reltuples)::bigint as estimated_rows,
              least(s.reltuples, f.reltuples) < 0 as uncounted
         from opstate_journal_partitions() j
         join pg_class s on s.oid = to_regclass(quote_ident('operation_step_' || j.suffix))
         join pg_class f on f.oid = to_regclass(quote_ident('operation_failure_event_' || j.suffix))`,
    );
    return rows.map((r) => ({
      suffix: String(r.suffix),
      lowerId: text(r.lower_id),
      upperId: text(r.upper_id),
      isDefault: r.is_default === true,
      estimatedRows: r.uncounted === true ? -1 : Number(r.estimated_rows),
    }));
  }

  /** Rows in the default partitions (there only when spans were not made in time). */
  async spilled(): Promise<number> {
    const [r] = await this.#exec.execute('select opstate_journal_spilled() as n');
    return Number(r?.n ?? 0);
  }

  /** Makes spans until `ahead` whole ones lie past today; returns how many it made. */
  async extend(ahead = 2): Promise<number> {
    const [r] = await this.#exec.execute(sql`select opstate_journal_extend(${ahead}::int) as made`);
    return Number(r?.made ?? 0);
  }

  /**
   * Drops every span the policy lets go, oldest first, one per statement, and reports the span
   * that stopped it (pruning stops at the first span kept).
   */
  async prune(now?: Date): Promise<Pick<JournalMaintenance, 'dropped' | 'kept'>> {
    const dropped: JournalPruneStep[] = [];
    for (;;) {
      const at = now === undefined ? sql`now()` : sql`${now.toISOString()}::timestamptz`;
      const rows = await this.#exec.execute(sql`select * from opstate_journal_prune(${at})`);
      const steps = rows.map(toStep);
      const gone = steps.filter((s) => s.dropped);
      if (gone.length === 0) return { dropped, kept: steps };
      dropped.push(...gone);
    }
  }
}
