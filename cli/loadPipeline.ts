import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { OpstateError } from '../machines/OpstateError.ts';
import { definePipeline, type Pipeline, type PipelineSpec } from '../machines/pipeline.ts';
import { UsageError } from './Command.ts';

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
  let mod: { default?: unknown; pipeline?: unknown };
  try {
    mod = (await import(pathToFileURL(resolve(path)).href)) as typeof mod;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_UNKNOWN_FILE_EXTENSION') {
      throw new UsageError(
        `${path} is not JavaScript; compile it to .js or .mjs and pass that file`,
      );
    }
    if (code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(resolve(path))) {
      throw new UsageError(
        `${path} does not exist; pass the path of a .js or .mjs pipeline module`,
      );
    }
    throw err;
  }
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
