/**
 * What a physical copy is a copy of. The value is the artifact's table name and the
 * `physical_copy.artifact_type` discriminator; each has its own copy subtype table.
 */
export const ArtifactType = {
  RAW_DATA_FILE: 'raw_data_file',
  RAW_DATA_PACKAGE: 'raw_data_package',
  DATA_TRANSFER_PACKAGE: 'data_transfer_package',
} as const;
export type ArtifactType = (typeof ArtifactType)[keyof typeof ArtifactType];

export const ARTIFACT_TYPES: readonly ArtifactType[] = Object.freeze(Object.values(ArtifactType));

/**
 * Narrows an outside value to an `ArtifactType`.
 *
 * @example
 * ```ts
 * if (!isArtifactType(body.artifactType)) throw badInput('unknown artifact type');
 * ```
 */
export function isArtifactType(value: unknown): value is ArtifactType {
  return typeof value === 'string' && (ARTIFACT_TYPES as readonly string[]).includes(value);
}
