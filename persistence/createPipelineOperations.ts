import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import {
  type CreateOperationInput,
  routedLocationId,
  toOperationInsert,
} from './CreateOperationInput.ts';
import { SqlState, sqlStateOf } from './databaseError.ts';
import { fenceHolds, type LeaseFence, notLeader } from './LeaseFence.ts';
import type { Database } from './openDatabase.ts';
import { selectRoutedLocations } from './reads/selectRoutedLocations.ts';
import { insertOperations } from './sql/insertOperations.ts';

/** One operation a pipeline pass creates, with the subject it is keyed on. */
export interface PipelineOperation {
  readonly subjectId: string;
  readonly input: CreateOperationInput;
  /** The rollback it is created for (it follows a re-run's completion), if any. */
  readonly rollbackId?: string | null;
}

/**
 * Creates the operations a pipeline pass decided on, each marked with its subject
 * (`pipeline_subject_id`), and moves the pipeline's cursor to `afterId`, in one transaction:
 * both or neither. Under a `fence`, `NOT_LEADER` and nothing written once its lease is lost. A
 * live operation of the same (kind, subject, location) created meanwhile (a racing pass) makes
 * the unique key `operation_pipeline_live_key` refuse the insert: `CONFLICT`, nothing written, the
 * cursor where it was, so the next pass reads the completions again and finds the operation.
 *
 * @example
 * ```ts
 * const ids = await createPipelineOperations(database, { name: 'preservation', operations, afterId, now });
 * ```
 */
export async function createPipelineOperations(
  database: Database,
  pass: {
    readonly name: string;
    readonly operations: readonly PipelineOperation[];
    readonly afterId: number;
    readonly now: Date;
    readonly fence?: LeaseFence | undefined;
  },
): Promise<string[]> {
  const inputs = pass.operations.map((o) => o.input);
  const locations = await selectRoutedLocations(database, inputs.map(routedLocationId));
  const rows = pass.operations.map((o) => toOperationInsert(o.input, pass.now, locations));
  try {
    return await database.transaction(async (tx) => {
      if (pass.fence !== undefined && !(await fenceHolds(tx, pass.fence))) {
        throw notLeader(pass.fence);
      }
      const ids = await insertOperations(tx, rows);
      // Marked in the same transaction: the shared insert stays the one every create runs (and
      // that a database migrated before this column still takes). The key is checked here.
      if (ids.length > 0) {
        const marks = ids.map((id, n) => ({
          id,
          subject: pass.operations[n]?.subjectId,
          rollback: pass.operations[n]?.rollbackId ?? null,
        }));
        await tx.execute(sql`
          update operation o set pipeline_subject_id = m.subject, rollback_id = m.rollback
            from jsonb_to_recordset(${JSON.stringify(marks)}::jsonb)
              as m(id uuid, subject uuid, rollback uuid)
            where o.id = m.id`);
      }
      await tx.execute(sql`
        insert into pipeline_cursor (name, after_id, updated_at)
        values (${pass.name}, ${pass.afterId}, now())
        on conflict (name) do update set after_id = excluded.after_id, updated_at = now()`);
      return ids;
    });
  } catch (err) {
    const details = (err as { details?: { sqlState?: unknown; constraint?: unknown } }).details;
    if (
      (sqlStateOf(err) ?? details?.sqlState) === SqlState.UNIQUE_VIOLATION &&
      (details?.constraint ?? 'operation_pipeline_live_key') === 'operation_pipeline_live_key'
    ) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `pipeline '${pass.name}': a live operation of the same kind, subject and location exists already (operation_pipeline_live_key); nothing created, the completions are read again`,
        { details: { name: pass.name } },
      );
    }
    throw err;
  }
}
