import { ArchiveState } from './ArchiveState.ts';
import type { ArtifactType } from './ArtifactType.ts';
import type { OperationKind } from './OperationKind.ts';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';
import { OUTPUT_CONTRACT, type OutputRequirement } from './outputContract.ts';

/** What the contract check needs to know of one operation, read with its completion. */
export interface ContractFacts {
  /** The operation's stage fields by camelCase key (`rawDataPackageId`). */
  readonly fields: Readonly<Record<string, string | null | undefined>>;
  /**
   * For a kind with a `members` requirement (`membersFieldOf`): the ids of the raw data packages
   * recorded in that data transfer package. Empty otherwise.
   */
  readonly members: readonly string[];
  /**
   * For a kind with a `verifiedArchive` requirement (`needsVerifiedArchive`): the last row of the
   * operation's archive record before any deletion (`state` null when there is none) and the
   * package digest it carries. Absent otherwise.
   */
  readonly archive?: { readonly state: string | null; readonly contentSha256: string | null };
}

/** A copy a handler returned, as far as the contract looks at it. */
export interface ProducedCopy {
  readonly artifactType: string;
  readonly artifactId: string;
  readonly locationId: string;
  /** `sha256:<hex>`, as the copy records it (a `verifiedArchive` requirement compares it). */
  readonly checksum?: string | null;
}

/** One copy an operation must produce (the shape a handler returns among its outputs). */
export interface RequiredOutput {
  readonly artifactType: ArtifactType;
  readonly artifactId: string;
  readonly locationId: string;
}

/** One thing a result lacks, named for an operator. */
export interface MissingOutput {
  readonly artifactType: ArtifactType;
  /** Null when there is no artifact to name (a transfer package with no recorded member). */
  readonly artifactId: string | null;
  readonly locationId: string | null;
  readonly description: string;
}

const keyOf = (c: ProducedCopy) =>
  `${c.artifactType}/${c.artifactId.toLowerCase()}@${c.locationId.toLowerCase()}`;

function fieldValue(facts: ContractFacts, key: string): string | null {
  const v = facts.fields[key];
  return v === undefined || v === null || v === '' ? null : v;
}

/** One requirement, expanded against the facts: the copies it names, or why it cannot be met. */
function expand(
  r: OutputRequirement,
  facts: ContractFacts,
): { required: RequiredOutput[]; unmet: MissingOutput[] } {
  const locationId = fieldValue(facts, r.locationField);
  const at = `at location ${locationId ?? `(${r.locationField} not set)`} (${r.locationField})`;
  if (r.produce === 'named') {
    const artifactId = fieldValue(facts, r.artifactField);
    if (artifactId === null || locationId === null) {
      return {
        required: [],
        unmet: [
          {
            artifactType: r.artifactType,
            artifactId,
            locationId,
            description: `${r.artifactType} ${artifactId ?? `(${r.artifactField} not set)`} (${r.artifactField}) ${at}`,
          },
        ],
      };
    }
    return {
      required: [{ artifactType: r.artifactType, artifactId, locationId }],
      unmet: [],
    };
  }
  if (r.produce === 'verifiedArchive') return { required: [], unmet: [] };
  const bundle = fieldValue(facts, r.membersOf);
  if (bundle === null || locationId === null || facts.members.length === 0) {
    return {
      required: [],
      unmet: [
        {
          artifactType: r.artifactType,
          artifactId: null,
          locationId,
          description: `a ${r.artifactType} ${at} for every raw data package recorded in data transfer package ${bundle ?? `(${r.membersOf} not set)`} (${r.membersOf}), and none is recorded there: record its members (ArtifactRepository.assignPackages) and retry the operation`,
        },
      ],
    };
  }
  return {
    required: facts.members.map((artifactId) => ({
      artifactType: r.artifactType,
      artifactId,
      locationId,
    })),
    unmet: [],
  };
}

/**
 * A `verifiedArchive` requirement against the facts: nothing when the archive record ends with
 * VERIFIED and the copy returned at the location carries that package's checksum, else what is
 * missing, named.
 */
function unverifiedArchive(
  r: Extract<OutputRequirement, { produce: 'verifiedArchive' }>,
  facts: ContractFacts,
  outputs: readonly ProducedCopy[],
): MissingOutput[] {
  const artifactId = fieldValue(facts, r.artifactField);
  const locationId = fieldValue(facts, r.locationField);
  const state = facts.archive?.state ?? null;
  const what = `a VERIFIED archive record of ${r.artifactType} ${artifactId ?? `(${r.artifactField} not set)`} at location ${locationId ?? `(${r.locationField} not set)`} (${r.locationField})`;
  const fix =
    "a long-term archive completes only through opstate's archive protocol (createStageHandlers or defineArchiveStage), which stores, reads back, verifies and records it";
  const missing = (why: string): MissingOutput[] => [
    {
      artifactType: r.artifactType,
      artifactId,
      locationId,
      description: `${what}: ${why}; ${fix}`,
    },
  ];
  if (state !== ArchiveState.VERIFIED) {
    return missing(
      state === null
        ? 'the operation has no archive record'
        : `the operation's archive record ends with ${state}`,
    );
  }
  const expected = `sha256:${facts.archive?.contentSha256 ?? ''}`;
  const copy =
    artifactId === null || locationId === null
      ? undefined
      : outputs.find(
          (o) => keyOf(o) === keyOf({ artifactType: r.artifactType, artifactId, locationId }),
        );
  if (copy !== undefined && copy.checksum !== undefined && copy.checksum !== expected) {
    return missing(
      `the copy returned carries checksum ${copy.checksum}, the VERIFIED package ${expected}`,
    );
  }
  return [];
}

/**
 * The copies an operation of `kind` must produce, given its facts (`OUTPUT_CONTRACT`). A
 * requirement that names nothing (a transfer package with no recorded member) adds no copy here;
 * `missingOutputs` reports it.
 *
 * @example
 * ```ts
 * requiredOutputs(OperationKind.UNPACK, { fields: { dataTransferPackageId: dtp, locationId: buffer },
 *   members: [p1, p2] });
 * // [{ artifactType: 'raw_data_package', artifactId: p1, locationId: buffer }, { … p2 … }]
 * ```
 */
export function requiredOutputs(kind: OperationKind, facts: ContractFacts): RequiredOutput[] {
  return OUTPUT_CONTRACT[kind].outputs.flatMap((r) => expand(r, facts).required);
}

/**
 * What a handler's outputs lack of what `kind` must produce (empty when the contract is met).
 * Outputs beyond the contract are not its business.
 *
 * @example
 * ```ts
 * missingOutputs(OperationKind.LONG_TERM_ARCHIVE, facts, []);
 * // [{ artifactType: 'raw_data_package', artifactId: pkg, locationId: lta,
 * //    description: 'raw_data_package <pkg> (rawDataPackageId) at location <lta> (destinationLocationId)' }]
 * ```
 */
export function missingOutputs(
  kind: OperationKind,
  facts: ContractFacts,
  outputs: readonly ProducedCopy[],
): MissingOutput[] {
  const produced = new Set(outputs.map(keyOf));
  const missing: MissingOutput[] = [];
  for (const r of OUTPUT_CONTRACT[kind].outputs) {
    if (r.produce === 'verifiedArchive') {
      missing.push(...unverifiedArchive(r, facts, outputs));
      continue;
    }
    const { required, unmet } = expand(r, facts);
    missing.push(...unmet);
    for (const c of required) {
      if (produced.has(keyOf(c))) continue;
      const what =
        r.produce === 'named'
          ? `(${r.artifactField})`
          : `(a member of data transfer package ${fieldValue(facts, r.membersOf)}, ${r.membersOf})`;
      missing.push({
        artifactType: c.artifactType,
        artifactId: c.artifactId,
        locationId: c.locationId,
        description: `${c.artifactType} ${c.artifactId} ${what} at location ${c.locationId} (${r.locationField})`,
      });
    }
  }
  return missing;
}

/**
 * How many missing outputs a message names before it counts the rest: a failure message is kept
 * to 2,000 characters, and each name takes up to about 200.
 */
const NAMED = 6;

/**
 * The non-retryable `OUTPUT_CONTRACT` error for a result that lacks `missing`, naming each (the
 * first 6, then how many more).
 *
 * @example
 * ```ts
 * const missing = missingOutputs(kind, facts, outputs);
 * if (missing.length > 0) throw outputContractError(kind, operationId, missing);
 * ```
 */
export function outputContractError(
  kind: OperationKind,
  operationId: string,
  missing: readonly MissingOutput[],
): OpstateError {
  const named = missing.slice(0, NAMED).map((m) => m.description);
  const more = missing.length > NAMED ? `; and ${missing.length - NAMED} more` : '';
  return new OpstateError(
    OpstateErrorCode.OUTPUT_CONTRACT,
    `${kind} operation ${operationId} returned without ${missing.length === 1 ? 'an output' : `${missing.length} outputs`} its kind must produce: ${named.join('; ')}${more}. A handler returns each copy it made as { artifactType, artifactId, locationId } in its outputs (the copy is created with the completion); the attempt is not retried, since the same handler would return the same result`,
    {
      retryable: false,
      details: {
        operationId,
        kind,
        missing: missing.slice(0, 100).map(({ artifactType, artifactId, locationId }) => ({
          artifactType,
          artifactId,
          locationId,
        })),
      },
    },
  );
}
