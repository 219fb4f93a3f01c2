import { sql } from 'drizzle-orm';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import { checkId, notFound } from './applyEvents.ts';
import { checkJsonValue } from './checkJsonValue.ts';
import { toDate } from './OperationRecord.ts';
import type { Database, Row } from './openDatabase.ts';
import type { FailureEvent, OperationStep, TransitionEntry } from './publicRecords.ts';

export type { FailureEvent, OperationStep, TransitionEntry } from './publicRecords.ts';

/** The current plan generation of an operation: 1, or the last operator re-plan's. */
const generationOf = (id: string) =>
  sql`coalesce((select max(generation) from operation_replan where operation_id = ${id}::uuid), 1)`;

/**
 * The step columns `toStep` reads. A jsonb column comes from either driver already decoded, and
 * both decode SQL NULL (no result) and JSON null alike, so `no_result` tells them apart.
 */
const STEP_COLUMNS = sql.raw(
  'operation_id, attempt, generation, name, state, result, result is null as no_result, at',
);

function toStep(r: Row): OperationStep {
  return {
    operationId: String(r.operation_id),
    attempt: Number(r.attempt),
    generation: Number(r.generation ?? 1),
    name: String(r.name),
    state: String(r.state),
    result: r.no_result === true ? undefined : r.result,
    at: toDate(r.at) as Date,
  };
}

/**
 * The operation's durable history: the step journal a handler resumes from, the transition
 * history and the failure breadcrumbs.
 *
 * @example
 * ```ts
 * const journal = new JournalRepository(database);
 * const { step } = await journal.recordStep({ operationId, attempt, name: 'upload', state: 'done', result: { etag } });
 * ```
 */
export class JournalRepository {
  constructor(private readonly database: Database) {}

  /**
   * Records a step once. If a step of that name was already recorded (by this attempt or an
   * earlier one), nothing is written and the recorded step comes back with `recorded: false`, so
   * a re-run skips the side effect. A new step is accepted only from the attempt that holds the
   * operation IN_PROGRESS (`STALE_ATTEMPT` otherwise): a fenced worker cannot write the journal.
   * The result is any JSON value and reads back deep-equal; `undefined` records none (and reads
   * back `undefined`). A result JSON cannot hold exactly (a bigint, a Date, a function, NaN…) is
   * refused with `BAD_INPUT` naming where it is and what to record instead, and nothing is written.
   *
   * @example
   * ```ts
   * const { step, recorded } = await journal.recordStep({ operationId, attempt, name: 'plan', state: 'done', result: manifest });
   * if (!recorded) manifest = step.result; // the earlier run's result
   * ```
   */
  async recordStep(input: {
    operationId: string;
    attempt: number;
    name: string;
    state: string;
    result?: unknown;
  }): Promise<{ step: OperationStep; recorded: boolean }> {
    const id = checkId(input.operationId);
    if (typeof input.name !== 'string' || input.name === '' || typeof input.state !== 'string') {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        'a step needs a non-empty name and a state',
      );
    }
    if (input.result !== undefined) checkJsonValue(input.result, `step '${input.name}' result`);
    const result = input.result === undefined ? null : JSON.stringify(input.result);
    for (let round = 0; round < 3; round++) {
      const [row] = await this.database.execute(sql`
        with o as (select status, attempt, ${generationOf(id)} as generation
          from operation where id = ${id}::uuid),
        ins as (
          insert into operation_step (operation_id, attempt, generation, name, state, result)
          select ${id}::uuid, ${input.attempt}::int, o.generation, ${input.name}, ${input.state},
            ${result}::jsonb
          from o where o.status = 'IN_PROGRESS' and o.attempt = ${input.attempt}::int
          on conflict (operation_id, generation, name) do nothing
          returning ${STEP_COLUMNS}
        )
        select (select row_to_json(o) from o) as op,
          (select row_to_json(ins) from ins) as inserted,
          (select row_to_json(s) from (select ${STEP_COLUMNS} from operation_step
             where operation_id = ${id}::uuid
             and name = ${input.name} and generation = (select generation from o)) s)
            as existing`);
      // json values (row_to_json) come decoded from either driver.
      const inserted = (row?.inserted ?? null) as Row | null;
      const existing = (row?.existing ?? null) as Row | null;
      if (inserted) return { step: toStep(inserted), recorded: true };
      if (existing) return { step: toStep(existing), recorded: false };
      const op = (row?.op ?? null) as { status: string; attempt: number } | null;
      if (op === null) throw notFound(id);
      if (op.status !== 'IN_PROGRESS' || op.attempt !== input.attempt) {
        throw new OpstateError(
          OpstateErrorCode.STALE_ATTEMPT,
          `step '${input.name}' refused: operation ${id} is ${op.status} at attempt ${op.attempt}, not IN_PROGRESS at attempt ${input.attempt}`,
          { details: { id, status: op.status, attempt: op.attempt, stepAttempt: input.attempt } },
        );
      }
      // A concurrent writer recorded the same step after this statement began: read it again.
    }
    throw new OpstateError(
      OpstateErrorCode.CONFLICT,
      `step '${input.name}' is contended; try again`,
      {
        retryable: true,
      },
    );
  }

  /**
   * The recorded step of that name in the current plan generation, if any.
   *
   * @example
   * ```ts
   * const upload = await journal.getStep(operationId, 'upload');
   * ```
   */
  async getStep(operationId: string, name: string): Promise<OperationStep | undefined> {
    const [r] = await this.database.execute(sql`
      select ${STEP_COLUMNS} from operation_step
      where operation_id = ${checkId(operationId)}::uuid and name = ${name}
        and generation = ${generationOf(operationId)}`);
    return r === undefined ? undefined : toStep(r);
  }

  /**
   * Every recorded step of every plan generation, in the order they were recorded.
   *
   * @example
   * ```ts
   * const last = (await journal.listSteps(operationId)).at(-1);
   * ```
   */
  async listSteps(operationId: string): Promise<OperationStep[]> {
    const rows = await this.database.execute(sql`
      select ${STEP_COLUMNS} from operation_step
      where operation_id = ${checkId(operationId)}::uuid order by id`);
    return rows.map(toStep);
  }

  /**
   * Starts a new plan generation of a FAILED operation, for an operator who found its plan stale:
   * the journal's earlier steps stay as history, and the next attempt records its steps (its plan
   * first) beside them instead of resuming the old ones. Returns the new generation. `INVALID_EVENT`
   * unless the operation is FAILED (re-plan, then RETRY).
   *
   * @example
   * ```ts
   * const generation = await journal.replan(operationId, { by: 'operator', reason: 'source changed' });
   * await store.apply(operationId, { type: 'RETRY' }, { by: 'operator' });
   * ```
   */
  async replan(
    operationId: string,
    input: { by: string; reason?: string },
  ): Promise<{ generation: number }> {
    const id = checkId(operationId);
    const [row] = await this.database.execute(sql`
      with o as (select status, ${generationOf(id)} as generation from operation where id = ${id}::uuid),
      ins as (
        insert into operation_replan (operation_id, generation, by, reason)
        select ${id}::uuid, o.generation + 1, ${input.by}, ${input.reason ?? null}
        from o where o.status = 'FAILED'
        on conflict do nothing
        returning generation
      )
      select (select row_to_json(o) from o) as op, (select generation from ins) as generation`);
    const op = (row?.op ?? null) as { status: string } | null;
    if (op === null) throw notFound(id);
    if (row?.generation == null) {
      throw new OpstateError(
        OpstateErrorCode.INVALID_EVENT,
        `re-plan refused: operation ${id} is ${op.status}; only a FAILED operation is re-planned (then retried)`,
        { details: { id, status: op.status } },
      );
    }
    return { generation: Number(row.generation) };
  }

  /**
   * The transition history, oldest first.
   *
   * @example
   * ```ts
   * const history = await journal.listTransitions(operationId);
   * ```
   */
  async listTransitions(operationId: string): Promise<TransitionEntry[]> {
    const rows = await this.database.execute(sql`
      select from_status, to_status, event, by, attempt, reason, at from operation_transition
      where operation_id = ${checkId(operationId)}::uuid order by id`);
    return rows.map((r) => ({
      from: (r.from_status ?? null) as OperationStatus | null,
      to: r.to_status as OperationStatus,
      event: String(r.event),
      by: String(r.by),
      attempt: Number(r.attempt),
      reason: r.reason == null ? null : String(r.reason),
      at: toDate(r.at) as Date,
    }));
  }

  /**
   * Records a failure breadcrumb outside a transition (e.g. a handler's own diagnosis); a second
   * one for the same (kind, operation, attempt) is ignored. Returns whether it was written.
   *
   * @example
   * ```ts
   * await journal.recordFailure({ kind, operationId, attempt, error: { message: 'checksum mismatch' } });
   * ```
   */
  async recordFailure(input: {
    kind: OperationKind;
    operationId: string;
    attempt: number;
    error: unknown;
  }): Promise<boolean> {
    const rows = await this.database.execute(sql`
      insert into operation_failure_event (kind, operation_id, attempt, error)
      values (${input.kind}, ${checkId(input.operationId)}::uuid, ${input.attempt}::int,
        ${JSON.stringify(input.error ?? null)}::jsonb)
      on conflict do nothing returning 1`);
    return rows.length === 1;
  }

  /**
   * The failure breadcrumbs of an operation, by attempt.
   *
   * @example
   * ```ts
   * const failures = await journal.listFailures(operationId);
   * ```
   */
  async listFailures(operationId: string): Promise<FailureEvent[]> {
    const rows = await this.database.execute(sql`
      select kind, operation_id, attempt, error, at from operation_failure_event
      where operation_id = ${checkId(operationId)}::uuid order by attempt`);
    return rows.map((r) => ({
      kind: r.kind as OperationKind,
      operationId: String(r.operation_id),
      attempt: Number(r.attempt),
      error: r.error,
      at: toDate(r.at) as Date,
    }));
  }
}
