import { z } from 'zod';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ARTIFACT_TYPES, type ArtifactType } from './ArtifactType.ts';
import type { OutputCopyInsert } from './sql/completeOperations.ts';
import { uuidSchema } from './subtypeFields.ts';

/** A copy an operation produced: one artifact at one location. */
export interface OutputCopy {
  readonly artifactType: ArtifactType;
  readonly artifactId: string;
  readonly locationId: string;
  readonly path?: string | null;
  readonly checksum?: string | null;
  readonly size?: number | null;
}

const outputSchema = z.strictObject({
  artifactType: z.enum(ARTIFACT_TYPES as [ArtifactType, ...ArtifactType[]]),
  artifactId: uuidSchema,
  locationId: uuidSchema,
  path: z.string().nullish(),
  checksum: z.string().nullish(),
  size: z.number().int().min(0).nullish(),
});

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
    const parsed = outputSchema.safeParse(output);
    if (!parsed.success) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `output ${n} of operation ${operationId}: ${parsed.error.issues
          .map((i) => `${i.path.join('.')}: ${i.message}`)
          .join('; ')}`,
        { details: { operationId, index: n } },
      );
    }
    const o = parsed.data;
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
