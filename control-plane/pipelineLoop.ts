import type { Clock } from '../machines/Clock.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { type Pipeline, type PipelineStage, readsAt } from '../machines/pipeline.ts';
import type { Logger } from '../observe/Logger.ts';
import { TransitionCursor } from '../observe/TransitionCursor.ts';
import { createPipelineOperations } from '../persistence/createPipelineOperations.ts';
import type { LeaseFence } from '../persistence/LeaseFence.ts';
import type { Database } from '../persistence/openDatabase.ts';
import { selectBundleMembers } from '../persistence/reads/selectBundleMembers.ts';
import { selectEntriesDue } from '../persistence/reads/selectEntriesDue.ts';
import { selectLocationIds } from '../persistence/reads/selectLocationIds.ts';
import { selectPipelineCompletions } from '../persistence/reads/selectPipelineCompletions.ts';
import { selectPipelineCursor } from '../persistence/reads/selectPipelineCursor.ts';
import { selectStageKeys } from '../persistence/reads/selectStageKeys.ts';
import {
  entryStages,
  type PipelineCreation,
  planEntries,
  planPipelinePass,
} from './planPipelinePass.ts';

/**
 * The pipeline's location names resolved to registered location ids; `CONFIG` naming the stage
 * and the location when one is not registered.
 *
 * @example
 * ```ts
 * const locations = await resolvePipelineLocations(database, pipeline);
 * ```
 */
export async function resolvePipelineLocations(
  database: Database,
  pipeline: Pipeline,
): Promise<Map<string, string>> {
  const ids = await selectLocationIds(database, Object.values(pipeline.locations));
  const resolved = new Map<string, string>();
  for (const name of pipeline.order) {
    const stage = pipeline.stages[name] as PipelineStage;
    for (const at of stage.from === undefined ? [stage.at] : [stage.from, stage.at]) {
      const where = pipeline.locations[at];
      const id = where === undefined ? undefined : ids.get(`${where.site}/${where.name}`);
      if (id === undefined) {
        throw new OpstateError(
          OpstateErrorCode.CONFIG,
          `pipeline '${pipeline.name}': stage '${name}' names location '${at}' (${where?.site}/${where?.name}), which is not registered; register it (opstate location add) before the control plane runs the pipeline`,
          { details: { stage: name, location: at } },
        );
      }
      resolved.set(at, id);
    }
  }
  return resolved;
}

/** Drills only: crash points of the pipeline pass (a hook may kill the process, `crashHere`). */
export interface PipelineFaults {
  /**
   * The pass decided what to create from completions it read; nothing of it is written yet.
   * `stages`: the stages it creates operations of; `creations`: each operation, by its stage and
   * subject.
   */
  beforeWrite?(
    stages: readonly string[],
    creations: readonly { readonly stage: string; readonly subjectId: string }[],
  ): void | Promise<void>;
}

/**
 * One pass of a pipeline, for a leader loop: reads the transitions past its cursor, asks
 * `planPipelinePass` which next operations are due (twice: once to learn the keys to look up,
 * once knowing which of them exist), and creates them with the cursor's advance in one fenced
 * transaction (`createPipelineOperations`). The cursor stored is the low-water mark: below every
 * transition id still awaited. A failed write (a lost race, a lost lease) forgets the cursor held
 * in memory, so the next pass starts again from the stored one. Returns whether a full page was
 * read (more may wait).
 *
 * @example
 * ```ts
 * leaderLoop({ name: 'pipeline', intervalMs: 250, pass: pipelinePass({ database, pipeline, ... }) });
 * ```
 */
export function pipelinePass(deps: {
  readonly database: Database;
  readonly pipeline: Pipeline;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly batchSize: number;
  readonly fence: () => LeaseFence | undefined;
  readonly onCreated: () => void;
  readonly faults?: PipelineFaults | undefined;
}): () => Promise<boolean> {
  const { database, pipeline, clock, batchSize } = deps;
  const by = `pipeline:${pipeline.name}`;
  const bundling = pipeline.order
    .map((n) => pipeline.stages[n] as PipelineStage)
    .find((s) => s.kind === OperationKind.DATA_TRANSFER_PACKAGE);
  let locations: Map<string, string> | undefined;
  /** Where the entry stages run: the locations whose "files complete" facts the pass reads. */
  let entryAt: string[] = [];
  let cursor = new TransitionCursor();
  return async () => {
    if (locations === undefined) {
      const resolved = await resolvePipelineLocations(database, pipeline);
      entryAt = entryStages(pipeline).map(
        (n) => resolved.get((pipeline.stages[n] as PipelineStage).at) as string,
      );
      locations = resolved;
    }
    const at = locations;
    if (!cursor.started) cursor.start(await selectPipelineCursor(database, pipeline.name));
    const now = clock.now();
    const { ids, completed } = await selectPipelineCompletions(
      database,
      cursor.after,
      cursor.gaps(now),
      batchSize,
    );
    const due = entryAt.length === 0 ? [] : await selectEntriesDue(database, entryAt, batchSize);
    if (ids.length === 0 && due.length === 0) return false;
    const packaged = completed
      .filter((c) => c.kind === OperationKind.RAW_DATA_PACKAGE)
      .flatMap((c) => c.outputs.map((o) => o.artifactId));
    const bundles =
      bundling === undefined
        ? new Map()
        : await selectBundleMembers(database, packaged, at.get(readsAt(bundling)) as string);
    const plan = (existing: ReadonlySet<string>): PipelineCreation[] =>
      planPipelinePass({ pipeline, locations: at, completed, bundles, existing, by });
    const keyOf = (c: PipelineCreation) => ({
      kind: c.input.kind,
      subjectId: c.subjectId,
      locationId: at.get((pipeline.stages[c.stage] as PipelineStage).at) as string,
    });
    const existing = await selectStageKeys(database, plan(new Set()).map(keyOf));
    const entries = planEntries({ pipeline, locations: at, due, by });
    const creations = [...plan(existing), ...entries.creations];
    if (ids.length === 0 && creations.length === 0 && entries.adopted.length === 0) return false;
    cursor.advance(ids, now);
    const awaited = cursor.gaps(now);
    const afterId = awaited.length === 0 ? cursor.after : Math.min(...awaited) - 1;
    if (creations.length > 0)
      await deps.faults?.beforeWrite?.(
        [...new Set(creations.map((c) => c.stage))],
        creations.map((c) => ({ stage: c.stage, subjectId: c.subjectId })),
      );
    try {
      await createPipelineOperations(database, {
        name: pipeline.name,
        operations: creations,
        afterId,
        now: new Date(now),
        fence: deps.fence(),
        adopted: entries.adopted,
      });
    } catch (err) {
      cursor = new TransitionCursor();
      throw err;
    }
    if (creations.length > 0) {
      deps.logger.log(
        'INFO',
        `pipeline '${pipeline.name}' created ${creations.length} operations`,
        {
          stages: [...new Set(creations.map((c) => c.stage))],
        },
      );
      deps.onCreated();
    }
    return ids.length >= batchSize || due.length >= batchSize;
  };
}
