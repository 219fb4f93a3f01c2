import { OpstateError } from '../machines/OpstateError.ts';
import { definePipeline, type Pipeline, type PipelineSpec } from '../machines/pipeline.ts';
import { UsageError } from './Command.ts';
import { importModule } from './importModule.ts';

/**
 * A pipeline module (`opstate control-plane --pipeline <module>`): JavaScript (`.js`/`.mjs`) that
 * exports a pipeline (`definePipeline`, `defaultPipeline`) as `pipeline` or as its default export.
 * It is checked again as `definePipeline` checks it; a module that is missing, not JavaScript,
 * exports no pipeline or one that does not pass those checks is a usage error naming the module.
 *
 * @example
 * ```ts
 * const pipeline = await loadPipeline('./pipeline.js');
 * ```
 */
export async function loadPipeline(path: string): Promise<Pipeline> {
  const mod = await importModule<{ default?: unknown; pipeline?: unknown }>(
    path,
    'pipeline module',
  );
  const exported = mod.pipeline ?? mod.default;
  if (typeof exported !== 'object' || exported === null) {
    throw new UsageError(
      `${path} must export a pipeline (definePipeline or defaultPipeline) as 'pipeline' or as its default export`,
    );
  }
  const spec = exported as PipelineSpec;
  try {
    return definePipeline({ name: spec.name, locations: spec.locations, stages: spec.stages });
  } catch (err) {
    if (err instanceof OpstateError) throw new UsageError(`${path}: ${err.message}`);
    throw err;
  }
}
