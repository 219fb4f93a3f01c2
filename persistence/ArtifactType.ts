// The artifact axis is pure domain vocabulary and lives in machines/ (the output contract names
// it); persistence callers keep importing it from here.
export { ARTIFACT_TYPES, ArtifactType, isArtifactType } from '../machines/ArtifactType.ts';
