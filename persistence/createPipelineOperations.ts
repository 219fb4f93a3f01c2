import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import {
  type CreateOperationInput,
  routedLocationId,
  toOperationInsert,
} from './CreateOperationInput.ts';
import { SqlState, sqlStateOf } from './databaseError.ts';
import { fenceHolds, type LeaseFence, notLeader } from './LeaseFence.ts';
import type { Database, Executor } from './openDatabase.ts';
import { selectRoutedLocations } from './reads/selectRoutedLocations.ts';
import { insertOperations } from './sql/insertOperations.ts';
import { uuidArray } from './sql/selectOperations.ts';

/** One operation a pipeline pass creates, with the subject it is keyed on. */
export interface PipelineOperation {
  readonly subjectId: string;
  readonly input: CreateOperationInput;
  /** The rollback it is created for (it follows a re-run's completion), if any. */
  readonly rollbackId?: string | null;
  /** The completed operation it follows (locked FOR SHARE by the write). */
  readonly causeId?: string;
  /** An entry stage's packaging: it consumes its subject's "files complete" fact. */
  readonly entry?: boolean;
}

/** A "files complete" fact consumed by a packaging that exists already (adopted, not created). */
export interface AdoptedEntry {
  readonly rawDataPackageId: string;
  readonly operationId: string;
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
    readonly adopted?: readonly AdoptedEntry[];
  },
): Promise<string[]> {
  const inputs = pass.operations.map((o) => o.input);
  const locations = await selectRoutedLocations(database, inputs.map(routedLocationId));
  try {
    return await database.transaction(async (tx) => {
      if (pass.fence !== undefined && !(await fenceHolds(tx, pass.fence))) {
        throw notLeader(pass.fence);
      }
      const operations = await withoutRedone(tx, pass.operations);
      const rows = operations.map((o) => toOperationInsert(o.input, pass.now, locations));
      const ids = await insertOperations(tx, rows);
      // Marked in the same transaction: the shared insert stays the one every create runs (and
      // that a database migrated before this column still takes). The key is checked here.
      if (ids.length > 0) {
        const marks = ids.map((id, n) => ({
          id,
          subject: operations[n]?.subjectId,
          rollback: operations[n]?.rollbackId ?? null,
        }));
        await tx.execute(sql`
          update operation o set pipeline_subject_id = m.subject, rollback_id = m.rollback
            from jsonb_to_recordset(${JSON.stringify(marks)}::jsonb)
              as m(id uuid, subject uuid, rollback uuid)
            where o.id = m.id`);
      }
      const consumed = [
        ...(pass.adopted ?? []),
        ...operations.flatMap((o, n) =>
          o.entry === true
            ? [{ rawDataPackageId: o.subjectId, operationId: ids[n] as string }]
            : [],
        ),
      ];
      if (consumed.length > 0) await consumeEntries(tx, pass.name, consumed);
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

/**
 * The operations whose cause no rollback has redone and none of whose input copies stands only on
 * redone operations, their causes and every operation that produced an input copy locked
 * `FOR SHARE` until the write commits. A rollback marks what it redoes `FOR UPDATE`: one committed
 * first is seen here (what it redoes creates nothing, the re-run's completion will), and one that
 * comes after waits for this write and then reads what it created, so it redoes that too. The
 * inputs matter where a stage reads what other completions made: a bundle is caused by its last
 * member's packaging, and a rollback of another member's packaging must stop it too. An input copy
 * stands while one operation that produced it is not redone (the re-run that finds the copy
 * present produces it again); a copy no operation produced (registered) always stands.
 */
async function withoutRedone(
  tx: Executor,
  operations: readonly PipelineOperation[],
): Promise<readonly PipelineOperation[]> {
  const causes = [...new Set(operations.flatMap((o) => (o.causeId ? [o.causeId] : [])))];
  const inputs = [...new Set(operations.flatMap((o) => o.input.inputs ?? []))];
  if (causes.length === 0 && inputs.length === 0) return operations;
  // Every cause and producer locked, redone or not: a lock on the redone ones only would let a
  // rollback of another mark it between this read and the commit.
  const rows = await tx.execute(sql`
    select o.id::text, o.superseded_by is not null as redone,
      array(select out.physical_copy_id::text from operation_output out
        where out.operation_id = o.id
          and out.physical_copy_id = any(${uuidArray(inputs)}::uuid[])) as made
    from operation o
    where o.id in (
      select unnest(${uuidArray(causes)}::uuid[])
      union
      select operation_id from operation_output
        where physical_copy_id = any(${uuidArray(inputs)}::uuid[]))
    order by o.id for share of o`);
  const redone = new Set(rows.filter((r) => r.redone === true).map((r) => String(r.id)));
  if (redone.size === 0) return operations;
  const standing = new Set<string>();
  const made = new Set<string>();
  for (const r of rows) {
    for (const copy of r.made as string[]) {
      made.add(copy);
      if (r.redone !== true) standing.add(copy);
    }
  }
  const stands = (copy: string) => !made.has(copy) || standing.has(copy);
  return operations.filter(
    (o) =>
      (o.causeId === undefined || !redone.has(o.causeId)) && (o.input.inputs ?? []).every(stands),
  );
}

/**
 * Marks each "files complete" fact consumed by its packaging; `CONFLICT` (rolling the write back)
 * when another pass consumed one first.
 */
async function consumeEntries(
  tx: Executor,
  name: string,
  consumed: readonly AdoptedEntry[],
): Promise<void> {
  const marked = await tx.execute(sql`
    update package_files_complete e set packaging_operation_id = m.op
      from jsonb_to_recordset(${JSON.stringify(consumed.map((c) => ({ pkg: c.rawDataPackageId, op: c.operationId })))}::jsonb)
        as m(pkg uuid, op uuid)
      where e.raw_data_package_id = m.pkg and e.packaging_operation_id is null
      returning e.raw_data_package_id`);
  if (marked.length !== consumed.length) {
    throw new OpstateError(
      OpstateErrorCode.CONFLICT,
      `pipeline '${name}': a package's "files complete" fact was consumed by another pass; nothing created, the facts are read again`,
      { details: { name } },
    );
  }
}
