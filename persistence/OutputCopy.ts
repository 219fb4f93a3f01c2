import { describeValue } from '../machines/describeValue.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ARTIFACT_TYPES, isArtifactType } from './ArtifactType.ts';
import type { OutputCopy } from './publicRecords.ts';
import type { OutputCopyInsert } from './sql/completeOperations.ts';
import { isUuid, UUID_EXAMPLE } from './subtypeFields.ts';

export type { OutputCopy } from './publicRecords.ts';

const OUTPUT_KEYS = ['artifactType', 'artifactId', 'locationId', 'path', 'checksum', 'size'];
const KNOWN: ReadonlySet<string> = new Set(OUTPUT_KEYS);

/** What is wrong with one output copy, in the handler's terms; nothing for a valid one. */
function outputProblems(output: unknown): string[] {
  if (typeof output !== 'object' || output === null || Array.isArray(output)) {
    return [
      `must be an object { artifactType, artifactId, locationId, path?, checksum?, size? }; got ${describeValue(output)}`,
    ];
  }
  const o = output as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(o)) {
    if (!KNOWN.has(key)) problems.push(`unknown field '${key}'; known: ${OUTPUT_KEYS.join(', ')}`);
  }
  if (!isArtifactType(o.artifactType)) {
    problems.push(
      o.artifactType === undefined
        ? 'artifactType is required'
        : `artifactType must be one of ${ARTIFACT_TYPES.join(', ')}; got ${describeValue(o.artifactType)}`,
    );
  }
  for (const key of ['artifactId', 'locationId']) {
    const v = o[key];
    if (v === undefined || v === null) problems.push(`${key} is required`);
    else if (!isUuid(v)) {
      problems.push(`${key} must be a uuid such as ${UUID_EXAMPLE}; got ${describeValue(v)}`);
    }
  }
  for (const key of ['path', 'checksum']) {
    const v = o[key];
    if (v !== undefined && v !== null && typeof v !== 'string') {
      problems.push(`${key} must be a string or null; got ${describeValue(v)}`);
    }
  }
  if (
    o.size !== undefined &&
    o.size !== null &&
    !(Number.isSafeInteger(o.size) && (o.size as number) >= 0)
  ) {
    problems.push(`size must be a whole number of bytes ≥ 0 or null; got ${describeValue(o.size)}`);
  }
  return problems;
}

/**
 * Validates the outputs of one completion into insert rows. Throws `BAD_INPUT` for a malformed
 * one or for the same artifact at the same location named twice.
 */
export function toOutputInserts(
  operationId: string,
  outputs: readonly OutputCopy[],
): OutputCopyInsert[] {
  const keys = new Set<string>();
  return outputs.map((output, n) => {
    const problems = outputProblems(output);
    if (problems.length > 0) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `output ${n} of operation ${operationId}: ${problems.join('; ')}`,
        { details: { operationId, index: n, problems } },
      );
    }
    const o = output;
    const key = `${o.artifactType}/${o.artifactId}@${o.locationId}`;
    if (keys.has(key)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `output ${n} of operation ${operationId} repeats ${key}`,
        { details: { operationId, index: n } },
      );
    }
    keys.add(key);
    return {
      operation_id: operationId,
      artifact_type: o.artifactType,
      artifact_id: o.artifactId,
      location_id: o.locationId,
      path: o.path ?? null,
      checksum: o.checksum ?? null,
      size: o.size ?? null,
    };
  });
}
