import { OperationKind } from '../machines/OperationKind.ts';
import type { PhysicalCopyRecord } from '../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { type SampleData, samplePackaging } from './sampleData.ts';

/** One stage of the sample pipeline: the operations it creates from the previous stage's outputs. */
export interface SampleStage {
  readonly title: string;
  readonly kind: OperationKind;
  inputs(sample: SampleData, previous: readonly PhysicalCopyRecord[]): CreateOperationInput[];
}

const at = (copies: readonly PhysicalCopyRecord[], locationId: string) =>
  copies.filter((c) => c.locationId === locationId).map((c) => c.id);

/**
 * The sample's stages sequenced by hand, every kind once in pipeline order: package the raw files
 * at the source, bundle the packages, transfer the bundle to the buffer, unpack it there, archive
 * every package from the buffer, stage one package from the archive to processing. Each stage
 * consumes the output copies of the one before (lineage through copies, never operation ids).
 * For a caller that submits every stage itself (the chaos workload); a declared pipeline
 * (`samplePipelineDefinition`) creates every stage after packaging on its own, as the demo runs it.
 *
 * @example
 * ```ts
 * let previous: PhysicalCopyRecord[] = [];
 * for (const stage of SAMPLE_PIPELINE) previous = await runStage(stage.inputs(sample, previous));
 * ```
 */
export const SAMPLE_PIPELINE: readonly SampleStage[] = Object.freeze([
  {
    title: 'packaging at the source',
    kind: OperationKind.RAW_DATA_PACKAGE,
    inputs: samplePackaging,
  },
  {
    title: 'bundling at the source',
    kind: OperationKind.DATA_TRANSFER_PACKAGE,
    inputs: (s, previous) => [
      {
        kind: OperationKind.DATA_TRANSFER_PACKAGE,
        fields: {
          dataTransferPackageId: s.dataTransferPackage.id,
          locationId: s.locations.source.id,
        },
        inputs: at(previous, s.locations.source.id),
      },
    ],
  },
  {
    title: 'transfer source → buffer',
    kind: OperationKind.TRANSFER,
    inputs: (s, previous) => [
      {
        kind: OperationKind.TRANSFER,
        fields: {
          dataTransferPackageId: s.dataTransferPackage.id,
          sourceLocationId: s.locations.source.id,
          destinationLocationId: s.locations.buffer.id,
        },
        inputs: at(previous, s.locations.source.id),
      },
    ],
  },
  {
    title: 'unpack at the buffer',
    kind: OperationKind.UNPACK,
    inputs: (s, previous) => [
      {
        kind: OperationKind.UNPACK,
        fields: {
          dataTransferPackageId: s.dataTransferPackage.id,
          locationId: s.locations.buffer.id,
        },
        inputs: at(previous, s.locations.buffer.id),
      },
    ],
  },
  {
    title: 'long-term archive buffer → archive',
    kind: OperationKind.LONG_TERM_ARCHIVE,
    inputs: (s, previous) =>
      previous
        .filter((c) => c.locationId === s.locations.buffer.id)
        .map((c) => ({
          kind: OperationKind.LONG_TERM_ARCHIVE,
          fields: {
            rawDataPackageId: c.artifactId,
            sourceLocationId: s.locations.buffer.id,
            destinationLocationId: s.locations.archive.id,
            archiveKey: `${s.artifacts.get(c.artifactId)?.name ?? c.artifactId}.tar`,
          },
          inputs: [c.id],
        })),
  },
  {
    title: 'staging archive → processing',
    kind: OperationKind.STAGING,
    inputs: (s, previous) =>
      previous
        .filter((c) => c.locationId === s.locations.archive.id)
        .slice(0, 1)
        .map((c) => ({
          kind: OperationKind.STAGING,
          fields: {
            rawDataPackageId: c.artifactId,
            sourceLocationId: s.locations.archive.id,
            destinationLocationId: s.locations.processing.id,
          },
          inputs: [c.id],
        })),
  },
]);
