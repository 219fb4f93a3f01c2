import { ArtifactType } from './ArtifactType.ts';
import { OperationKind } from './OperationKind.ts';

/** One stage field of a kind, as the contract documents it. */
export interface ContractField {
  /** The camelCase key a caller passes in `fields` (`rawDataPackageId`). */
  readonly key: string;
  /** What it names, for the reader of the kinds table. */
  readonly meaning: string;
  /** True when a caller may leave it out. */
  readonly optional?: boolean;
}

/**
 * What a kind must produce: a live copy of one artifact at one location, both named by the
 * operation's fields.
 * - `named`: the artifact the field `artifactField` names;
 * - `members`: every raw data package recorded in the data transfer package the field `membersOf`
 *   names (`raw_data_package.data_transfer_package_id`), at least one — a transfer package with no
 *   recorded member cannot be checked, so its unpack never counts as done.
 * - `verifiedArchive`: the artifact the field `artifactField` names was archived by opstate's archive
 *   protocol: the operation's archive record ends with VERIFIED (nothing after it but deletions),
 *   and the copy returned for it at `locationField` carries the verified package's checksum. A long
 *   term archive cannot complete on a handler's word alone.
 * In all, `locationField` names the location the copy must be at.
 */
export type OutputRequirement =
  | {
      readonly produce: 'named';
      readonly artifactType: ArtifactType;
      readonly artifactField: string;
      readonly locationField: string;
    }
  | {
      readonly produce: 'members';
      readonly artifactType: typeof ArtifactType.RAW_DATA_PACKAGE;
      readonly membersOf: string;
      readonly locationField: string;
    }
  | {
      readonly produce: 'verifiedArchive';
      readonly artifactType: typeof ArtifactType.RAW_DATA_PACKAGE;
      readonly artifactField: string;
      readonly locationField: string;
    };

/** One kind's contract: what it consumes, the fields it is created with, what it must produce. */
export interface KindContract {
  /** The stage, as the pipeline calls it. */
  readonly stage: string;
  /** The input copies its handler reads (prose: the runtime does not check inputs). */
  readonly inputs: string;
  /** Every stage field of the kind, in the order of its subtype table. */
  readonly fields: readonly ContractField[];
  /**
   * What a completion must include among its outputs. Outputs beyond these are allowed and
   * created too (each still validated).
   */
  readonly outputs: readonly OutputRequirement[];
}

const named = (
  artifactType: ArtifactType,
  artifactField: string,
  locationField: string,
): OutputRequirement => ({ produce: 'named', artifactType, artifactField, locationField });

/**
 * The output contract of every kind, in one exhaustive table: a kind missing here fails to
 * compile. The worker's completion checks each handler result against it (`missingOutputs`): a
 * result that lacks a required copy fails its attempt for good (`OUTPUT_CONTRACT`) with what is
 * missing named, instead of completing. The README's kinds table is rendered from it
 * (`outputContractTable`), and a test keeps the fields in step with the subtype tables.
 *
 * @example
 * ```ts
 * OUTPUT_CONTRACT[OperationKind.LONG_TERM_ARCHIVE].outputs;
 * // [{ produce: 'named', artifactType: 'raw_data_package', artifactField: 'rawDataPackageId',
 * //    locationField: 'destinationLocationId' }, { produce: 'verifiedArchive', … }]
 * ```
 */
export const OUTPUT_CONTRACT: Readonly<Record<OperationKind, KindContract>> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: {
    stage: 'packaging',
    inputs: "the package's raw data file copies at the location",
    fields: [
      { key: 'rawDataPackageId', meaning: 'the raw data package to build' },
      { key: 'locationId', meaning: 'where the files are and the package is written' },
    ],
    outputs: [named(ArtifactType.RAW_DATA_PACKAGE, 'rawDataPackageId', 'locationId')],
  },
  [OperationKind.DATA_TRANSFER_PACKAGE]: {
    stage: 'bundling',
    inputs: 'raw data package copies at the location',
    fields: [
      { key: 'dataTransferPackageId', meaning: 'the data transfer package to build' },
      { key: 'locationId', meaning: 'where the packages are and the bundle is written' },
    ],
    outputs: [named(ArtifactType.DATA_TRANSFER_PACKAGE, 'dataTransferPackageId', 'locationId')],
  },
  [OperationKind.TRANSFER]: {
    stage: 'transfer',
    inputs: "the data transfer package's copy at the source",
    fields: [
      { key: 'dataTransferPackageId', meaning: 'the data transfer package to move' },
      { key: 'sourceLocationId', meaning: 'where it is read' },
      { key: 'destinationLocationId', meaning: 'where it is written' },
    ],
    outputs: [
      named(ArtifactType.DATA_TRANSFER_PACKAGE, 'dataTransferPackageId', 'destinationLocationId'),
    ],
  },
  [OperationKind.UNPACK]: {
    stage: 'unpack',
    inputs: "the data transfer package's copy at the location",
    fields: [
      { key: 'dataTransferPackageId', meaning: 'the data transfer package to unpack' },
      { key: 'locationId', meaning: 'where it is and its packages are written' },
    ],
    outputs: [
      {
        produce: 'members',
        artifactType: ArtifactType.RAW_DATA_PACKAGE,
        membersOf: 'dataTransferPackageId',
        locationField: 'locationId',
      },
    ],
  },
  [OperationKind.LONG_TERM_ARCHIVE]: {
    stage: 'long-term archive',
    inputs: "the raw data package's copy at the source",
    fields: [
      { key: 'rawDataPackageId', meaning: 'the raw data package to archive' },
      { key: 'sourceLocationId', meaning: 'where it is read' },
      { key: 'destinationLocationId', meaning: 'the long-term archive' },
      {
        key: 'archiveKey',
        meaning: 'the stable object key (default `raw_data_package/<id>.tar`)',
        optional: true,
      },
    ],
    outputs: [
      named(ArtifactType.RAW_DATA_PACKAGE, 'rawDataPackageId', 'destinationLocationId'),
      {
        produce: 'verifiedArchive',
        artifactType: ArtifactType.RAW_DATA_PACKAGE,
        artifactField: 'rawDataPackageId',
        locationField: 'destinationLocationId',
      },
    ],
  },
  [OperationKind.STAGING]: {
    stage: 'staging',
    inputs: "the raw data package's archive copy at the source",
    fields: [
      { key: 'rawDataPackageId', meaning: 'the raw data package to stage' },
      { key: 'sourceLocationId', meaning: 'the archive it is read from' },
      { key: 'destinationLocationId', meaning: 'the processing area it is extracted to' },
    ],
    outputs: [named(ArtifactType.RAW_DATA_PACKAGE, 'rawDataPackageId', 'destinationLocationId')],
  },
});

/**
 * The field whose data transfer package's members a kind's contract needs (its `members`
 * requirement), if any: the one fact besides the fields that the completion reads.
 *
 * @example
 * ```ts
 * membersFieldOf(OperationKind.UNPACK); // 'dataTransferPackageId'
 * membersFieldOf(OperationKind.TRANSFER); // undefined
 * ```
 */
export function membersFieldOf(kind: OperationKind): string | undefined {
  for (const r of OUTPUT_CONTRACT[kind].outputs) if (r.produce === 'members') return r.membersOf;
  return undefined;
}

/**
 * Whether a kind's contract needs its archive record (a `verifiedArchive` requirement): the other
 * fact the completion reads for it.
 *
 * @example
 * ```ts
 * needsVerifiedArchive(OperationKind.LONG_TERM_ARCHIVE); // true
 * ```
 */
export function needsVerifiedArchive(kind: OperationKind): boolean {
  return OUTPUT_CONTRACT[kind].outputs.some((r) => r.produce === 'verifiedArchive');
}
