import { sql } from 'drizzle-orm';
import type { Executor } from '../openDatabase.ts';

/** A rollback, and what became of it. */
export interface RollbackOutcome {
  readonly id: string;
  readonly stage: string;
  readonly by: string;
  /** How many operations its plan redoes. */
  readonly redone: number;
  /** How many operations are marked superseded by it. */
  readonly superseded: number;
  /** How many operations carry its id (the target's, created with it; the later ones, by the pass). */
  readonly caused: number;
  /** How many of those COMPLETED. */
  readonly completed: number;
}

/**
 * The rollbacks recorded, oldest first, each with how many operations its plan redoes, how many
 * it superseded, and how many carry its id (and COMPLETED).
 *
 * @example
 * ```ts
 * const [r] = await selectRollbackOutcomes(database);
 * const whole = r?.caused === r?.redone;
 * ```
 */
export async function selectRollbackOutcomes(exec: Executor): Promise<RollbackOutcome[]> {
  const rows = await exec.execute(sql`
    select r.id::text, r.stage, r.requested_by,
      jsonb_array_length(r.plan->'redone')::int as redone,
      (select count(*) from operation o where o.superseded_by = r.id)::int as superseded,
      (select count(*) from operation o where o.rollback_id = r.id)::int as caused,
      (select count(*) from operation o where o.rollback_id = r.id and o.status = 'COMPLETED')::int
        as completed
    from pipeline_rollback r order by r.created_at, r.id`);
  return rows.map((r) => ({
    id: String(r.id),
    stage: String(r.stage),
    by: String(r.requested_by),
    redone: Number(r.redone),
    superseded: Number(r.superseded),
    caused: Number(r.caused),
    completed: Number(r.completed),
  }));
}

/**
 * Each operation a rollback touched, by id: the rollback it carries, the one that superseded it.
 *
 * @example
 * ```ts
 * (await selectRollbackMarks(database)).get(operationId)?.supersededBy;
 * ```
 */
export async function selectRollbackMarks(
  exec: Executor,
): Promise<
  Map<string, { readonly rollbackId: string | null; readonly supersededBy: string | null }>
> {
  const rows = await exec.execute(sql`
    select id::text, rollback_id::text, superseded_by::text from operation
    where rollback_id is not null or superseded_by is not null`);
  return new Map(
    rows.map((r) => [
      String(r.id),
      {
        rollbackId: r.rollback_id == null ? null : String(r.rollback_id),
        supersededBy: r.superseded_by == null ? null : String(r.superseded_by),
      },
    ]),
  );
}
