import { type RequiredOutput, requiredOutputs } from '../machines/missingOutputs.ts';
import { checkId, notFound } from './applyEvents.ts';
import type { Executor } from './openDatabase.ts';
import { selectForCompletion } from './sql/selectForCompletion.ts';

/**
 * The copies an operation must produce by its kind's output contract, read from the same facts
 * its completion is checked against (one statement). Handlers reach it as
 * `ctx.requiredOutputs()`.
 *
 * @example
 * ```ts
 * const required = await requiredOutputsOf(database, operationId);
 * // [{ artifactType: 'raw_data_package', artifactId: pkg, locationId: lta }]
 * ```
 */
export async function requiredOutputsOf(
  exec: Executor,
  operationId: string,
): Promise<RequiredOutput[]> {
  const id = checkId(operationId);
  const row = (await selectForCompletion(exec, [id])).get(id);
  if (row === undefined) throw notFound(id);
  return requiredOutputs(row.record.kind, row.facts);
}
