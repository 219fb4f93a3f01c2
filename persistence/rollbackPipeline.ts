import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Pipeline } from '../machines/pipeline.ts';
import { planRollback, type RollbackPlan } from '../machines/planRollback.ts';
import { submitterProblem } from '../machines/submitter.ts';
import {
  type CreateOperationInput,
  routedLocationId,
  toOperationInsert,
} from './CreateOperationInput.ts';
import { SqlState, sqlStateOf } from './databaseError.ts';
import type { Database, Executor } from './openDatabase.ts';
import type { PipelineRollback, RollbackRequest } from './publicRecords.ts';
import { selectRollbackFacts } from './reads/selectRollbackFacts.ts';
import { selectRoutedLocations } from './reads/selectRoutedLocations.ts';
import { insertOperations } from './sql/insertOperations.ts';
import { isUuid, UUID_EXAMPLE } from './subtypeFields.ts';
import { timeOrderedId } from './timeOrderedId.ts';

const bad = (message: string, details: Record<string, unknown> = {}) =>
  new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details });

function toRecord(
  plan: RollbackPlan,
  request: { readonly by: string; readonly dryRun: boolean },
  rollbackId: string | null,
  ids: readonly string[],
  at: Date,
): PipelineRollback {
  return {
    rollbackId,
    dryRun: request.dryRun,
    pipeline: plan.pipeline,
    artifact: plan.artifact as PipelineRollback['artifact'],
    stage: plan.stage,
    stages: plan.stages,
    by: request.by,
    at,
    redone: plan.redone,
    created: plan.creates.map((c, n) => ({
      stage: c.stage,
      operationId: ids[n] ?? null,
      kind: c.kind,
      subjectId: c.subjectId,
      inputs: c.inputs,
    })),
    superseded: plan.superseded.map((c) => ({
      copyId: c.id,
      artifactType: c.artifactType,
      artifactId: c.artifactId,
      location: c.location,
      status: c.status,
      stage: c.stage,
    })),
    widened: plan.widened,
  };
}

/**
 * Rolls an artifact (a raw data package or data transfer package) back to a stage of `pipeline`,
 * in ONE transaction: reads its family's operations `FOR UPDATE`, decides (`planRollback`),
 * writes the `pipeline_rollback` row (who, when, the plan), marks the operations of the stage and
 * every later stage superseded by it, and creates the target stage's operations again (PENDING,
 * recorded as by `by`, each carrying the rollback's id and its pipeline subject, so the live key
 * `operation_pipeline_live_key` holds). The pipeline's pass creates every later stage from the
 * re-run's completions, once. Deletes nothing and changes no copy. With `dryRun` it decides and
 * writes nothing. Refused with nothing written: a stage the pipeline does not have, an id that is
 * no uuid, a stage before a transfer package's first or one the artifact never reached, a bad `by`
 * (`BAD_INPUT`); an id naming no package (`NOT_FOUND`); an operation to redo that is live, or a
 * racing rollback (`CONFLICT`); a re-run that would read a copy that is gone (`UNSAFE`, naming it).
 *
 * @example
 * ```ts
 * const r = await rollbackPipeline(database, pipeline, locations,
 *   { artifact: pkg, to: 'transfer-1', by: 'operator:alice', dryRun: false }, new Date(clock.now()));
 * r.created[0]?.operationId; // the new transfer, PENDING
 * ```
 */
export async function rollbackPipeline(
  database: Database,
  pipeline: Pipeline,
  locations: ReadonlyMap<string, string>,
  request: Required<Omit<RollbackRequest, 'dryRun'>> & { readonly dryRun: boolean },
  now: Date,
): Promise<PipelineRollback> {
  if (!Object.hasOwn(pipeline.stages, request.to)) {
    throw bad(
      `pipeline '${pipeline.name}' has no stage '${String(request.to)}'; its stages: ${pipeline.order.join(', ')}`,
      { stage: request.to },
    );
  }
  if (!isUuid(request.artifact)) {
    throw bad(
      `the artifact to roll back must be a raw data package's or data transfer package's id (a uuid such as ${UUID_EXAMPLE})`,
      { artifact: request.artifact },
    );
  }
  const problem = submitterProblem(request.by);
  if (problem !== undefined) throw bad(`by ${problem}`);
  const run = async (tx: Executor): Promise<PipelineRollback> => {
    const facts = await selectRollbackFacts(tx, request.artifact, { lock: !request.dryRun });
    if (facts === undefined) {
      throw new OpstateError(
        OpstateErrorCode.NOT_FOUND,
        `no raw data package or data transfer package ${request.artifact}; opstate artifact lists what is registered`,
        { details: { artifact: request.artifact } },
      );
    }
    const plan = planRollback({ pipeline, locations, stage: request.to, facts });
    if (request.dryRun) return toRecord(plan, request, null, [], now);
    const rollbackId = timeOrderedId(now.getTime());
    await tx.execute(sql`
      insert into pipeline_rollback (id, pipeline, artifact_type, artifact_id, stage, requested_by,
        created_at, plan)
      values (${rollbackId}::uuid, ${pipeline.name}, ${plan.artifact.type}, ${plan.artifact.id}::uuid,
        ${plan.stage}, ${request.by}, ${now.toISOString()}::timestamptz,
        ${JSON.stringify(toRecord(plan, request, null, [], now))}::jsonb)`);
    const redone = plan.redone.map((r) => r.operationId);
    const marked = await tx.execute(sql`
      update operation set superseded_by = ${rollbackId}::uuid
      where id = any(${`{${redone.join(',')}}`}::uuid[]) and superseded_by is null
        and status in ('COMPLETED', 'FAILED')
      returning id`);
    if (marked.length !== redone.length) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `the operations to redo changed while the rollback was decided; nothing was changed, roll back again`,
        { details: { artifact: plan.artifact.id } },
      );
    }
    const inputs = plan.creates.map(
      (c) =>
        ({
          kind: c.kind,
          fields: c.fields,
          inputs: c.inputs,
          by: request.by,
        }) as unknown as CreateOperationInput,
    );
    const routed = await selectRoutedLocations(tx, inputs.map(routedLocationId));
    const ids = await insertOperations(
      tx,
      inputs.map((i) => toOperationInsert(i, now, routed)),
    );
    const marks = ids.map((id, n) => ({ id, subject: plan.creates[n]?.subjectId }));
    await tx.execute(sql`
      update operation o set pipeline_subject_id = m.subject, rollback_id = ${rollbackId}::uuid
        from jsonb_to_recordset(${JSON.stringify(marks)}::jsonb) as m(id uuid, subject uuid)
        where o.id = m.id`);
    return toRecord(plan, request, rollbackId, ids, now);
  };
  try {
    return request.dryRun ? await run(database) : await database.transaction(run);
  } catch (err) {
    const details = (err as { details?: { sqlState?: unknown } }).details;
    if ((sqlStateOf(err) ?? details?.sqlState) === SqlState.UNIQUE_VIOLATION) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `a live operation of the target stage exists already (operation_pipeline_live_key): another rollback or the pipeline's pass created it; nothing was changed`,
        { cause: err, details: { artifact: request.artifact, stage: request.to } },
      );
    }
    throw err;
  }
}
