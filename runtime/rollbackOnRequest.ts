import { resolvePipelineLocations } from '../control-plane/pipelineLoop.ts';
import type { Clock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { Pipeline } from '../machines/pipeline.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { PipelineRollback, RollbackRequest } from '../persistence/publicRecords.ts';
import { rollbackPipeline } from '../persistence/rollbackPipeline.ts';

/**
 * `runtime.rollback` and `opstate rollback`: rolls an artifact back to a stage of `pipeline` (see
 * `rollbackPipeline`), recorded as by `request.by`, else `by`; then wakes the local control plane to
 * schedule the re-run. A dry run decides and returns the plan and writes nothing. Without a
 * pipeline it is `CONFIG`: stage names mean nothing without one.
 *
 * @example
 * ```ts
 * const r = await rollbackFor({ database, clock, wake, pipeline }, { artifact: pkg, to: 'bundling' }, 'svc');
 * ```
 */
export async function rollbackFor(
  runtime: {
    readonly database: Database;
    readonly clock: Clock;
    readonly wake: () => void;
    readonly pipeline: Pipeline | undefined;
  },
  request: RollbackRequest,
  by: string,
): Promise<PipelineRollback> {
  const { pipeline } = runtime;
  if (pipeline === undefined) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'a rollback names a stage of a pipeline, and this runtime has none; open it with createRuntime({ pipeline }) (opstate rollback takes --pipeline <module>)',
    );
  }
  const locations = await resolvePipelineLocations(runtime.database, pipeline);
  const dryRun = request.dryRun === true;
  const rollback = await rollbackPipeline(
    runtime.database,
    pipeline,
    locations,
    { artifact: request.artifact, to: request.to, by: request.by ?? by, dryRun },
    new Date(runtime.clock.now()),
  );
  if (!dryRun) runtime.wake();
  return rollback;
}
