import { ArtifactType } from './ArtifactType.ts';
import type { OperationKind } from './OperationKind.ts';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';
import type { OperationStatus } from './operationMachine.ts';
import { PhysicalCopyStatus } from './physicalCopyMachine.ts';
import { type Pipeline, type PipelineStage, STAGE_ARTIFACTS } from './pipeline.ts';

// A rollback up a pipeline's lineage, decided from facts the database hands over (pure).

/** A physical copy as a rollback sees it. */
export interface RollbackCopy {
  readonly id: string;
  readonly artifactType: string;
  readonly artifactId: string;
  readonly locationId: string;
  /** `site/name` of its location. */
  readonly location: string;
  readonly status: string;
}

/** One operation of the artifact's family, with the copies it consumed and produced. */
export interface RollbackOperation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  /** The raw data package or data transfer package it acts on. */
  readonly subjectId: string;
  readonly targetLocationId: string | null;
  /** Its subtype fields by camelCase key (a move's `sourceLocationId` among them). */
  readonly fields: Readonly<Record<string, string | null>>;
  readonly inputs: readonly RollbackCopy[];
  readonly outputs: readonly RollbackCopy[];
  /** The rollback that redoes it already, if one does. */
  readonly supersededBy: string | null;
  /** When it was created (ISO text): the newest of a stage and subject is the one redone from. */
  readonly createdAt: string;
}

/** The artifact rolled back and its family, as read. */
export interface RollbackFacts {
  readonly artifact:
    | {
        readonly type: typeof ArtifactType.RAW_DATA_PACKAGE;
        readonly id: string;
        /** The data transfer package it is bundled in, if any. */
        readonly bundleId: string | null;
        /** Every raw data package of that bundle, itself among them (none without a bundle). */
        readonly bundleMembers: readonly string[];
      }
    | {
        readonly type: typeof ArtifactType.DATA_TRANSFER_PACKAGE;
        readonly id: string;
        /** The raw data packages it carries. */
        readonly members: readonly string[];
      };
  readonly operations: readonly RollbackOperation[];
  /** The live (not DELETED) copies of every artifact a redone operation reads, by artifact id. */
  readonly liveCopies: ReadonlyMap<string, readonly RollbackCopy[]>;
}

/** An operation the rollback redoes (and marks superseded). */
export interface RedoneOperation {
  readonly stage: string;
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly subjectId: string;
}

/** An operation of the target stage the rollback creates itself. */
export interface RollbackCreation {
  readonly stage: string;
  readonly kind: OperationKind;
  readonly subjectId: string;
  readonly fields: Readonly<Record<string, string>>;
  readonly inputs: readonly string[];
}

/** A copy a redone operation produced: the re-run produces it again. */
export interface SupersededCopy extends RollbackCopy {
  /** The stage whose redone operation produced it. */
  readonly stage: string;
  readonly producedBy: string;
}

/** What a rollback will do (or, dry, would do). */
export interface RollbackPlan {
  readonly pipeline: string;
  readonly artifact: { readonly type: ArtifactType; readonly id: string };
  readonly stage: string;
  /** The target stage and every stage after it, in run order. */
  readonly stages: readonly string[];
  readonly redone: readonly RedoneOperation[];
  readonly creates: readonly RollbackCreation[];
  readonly superseded: readonly SupersededCopy[];
  /**
   * The raw data packages besides the one rolled back whose stages are redone: its bundle's other
   * members, once a stage of the bundle is redone (empty otherwise).
   */
  readonly widened: readonly string[];
}

const LIVE: ReadonlySet<string> = new Set(['PENDING', 'SCHEDULED', 'IN_PROGRESS']);

const bad = (message: string, details: Record<string, unknown>) =>
  new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details });

/** The stage and every stage after it (following `after` back to it), in run order. */
export function stagesFrom(pipeline: Pipeline, stage: string): string[] {
  const follows = (name: string): boolean => {
    for (let at: string | undefined = name; at !== undefined; at = pipeline.stages[at]?.after) {
      if (at === stage) return true;
    }
    return false;
  };
  return pipeline.order.filter(follows);
}

/** Whether an operation is one of a stage's: its kind, where it runs and (a move) reads. */
function ofStage(
  stage: PipelineStage,
  locations: ReadonlyMap<string, string>,
  op: RollbackOperation,
): boolean {
  if (op.kind !== stage.kind || op.targetLocationId !== locations.get(stage.at)) return false;
  return stage.from === undefined || op.fields.sourceLocationId === locations.get(stage.from);
}

/**
 * The subjects a stage acts on within the artifact's family. A raw data package's own stages act
 * on it alone, except those after a stage of its bundle (`widened`): a bundle's stage produces
 * every member again (an unpack writes each member's buffer copy), so each member's later stages
 * are redone too, or the members' new copies would be read by no archive.
 */
function subjectsOf(
  stage: PipelineStage,
  facts: RollbackFacts,
  widened: boolean,
): readonly string[] {
  const subject = STAGE_ARTIFACTS[stage.kind].subject;
  const a = facts.artifact;
  if (a.type === ArtifactType.RAW_DATA_PACKAGE) {
    if (subject === ArtifactType.RAW_DATA_PACKAGE) {
      return widened && a.bundleMembers.length > 0 ? a.bundleMembers : [a.id];
    }
    return a.bundleId === null ? [] : [a.bundleId];
  }
  return subject === ArtifactType.DATA_TRANSFER_PACKAGE ? [a.id] : a.members;
}

/** Per stage of `stages` (run order), whether a stage of the bundle comes before it. */
function afterBundleStage(pipeline: Pipeline, stages: readonly string[]): Map<string, boolean> {
  const after = new Map<string, boolean>();
  let seen = false;
  for (const name of stages) {
    after.set(name, seen);
    const kind = (pipeline.stages[name] as PipelineStage).kind;
    if (STAGE_ARTIFACTS[kind].subject === ArtifactType.DATA_TRANSFER_PACKAGE) seen = true;
  }
  return after;
}

const describe = (c: RollbackCopy) =>
  `copy ${c.id} (${c.artifactType} ${c.artifactId} at ${c.location})`;

/** Refuses a re-run that would read a copy no longer there, saying which and what is left. */
function goneInput(
  facts: RollbackFacts,
  to: string,
  stage: string,
  input: RollbackCopy,
  superseded: ReadonlySet<string>,
): OpstateError {
  const live = facts.liveCopies.get(input.artifactId) ?? [];
  const left =
    live.length === 0
      ? `it has no live copy left`
      : live.every((c) => superseded.has(c.id))
        ? `its only live ${live.length === 1 ? 'copy is' : 'copies are'} ${live.map(describe).join(', ')}, which this rollback supersedes`
        : `its live copies are ${live.map(describe).join(', ')}, none where '${stage}' reads`;
  return new OpstateError(
    OpstateErrorCode.UNSAFE,
    `rolling back ${facts.artifact.type} ${facts.artifact.id} to '${to}' would leave ${input.artifactType} ${input.artifactId} with no copy to produce it again from: '${stage}' reads ${describe(input)}, which is ${input.status}, and ${left}; nothing was changed`,
    {
      details: {
        artifact: facts.artifact.id,
        stage,
        copyId: input.id,
        liveCopies: live.map((c) => c.id),
      },
    },
  );
}

/** Copy statuses of a deletion begun and not ended well: a re-run must not take such a copy. */
const DELETING: ReadonlySet<string> = new Set([
  PhysicalCopyStatus.DELETION_SCHEDULED,
  PhysicalCopyStatus.DELETION_IN_PROGRESS,
  PhysicalCopyStatus.DELETION_FAILED,
]);

/**
 * Refuses a rollback whose re-run would take, as its output, a copy whose deletion has begun or
 * failed: the unique live copy at that location is that one, so the re-run would produce it
 * "again" half deleted, and the pipeline (which reads PRESENT copies only) would stop there.
 */
function outputBeingDeleted(facts: RollbackFacts, to: string, copy: SupersededCopy): OpstateError {
  const what =
    copy.status === PhysicalCopyStatus.DELETION_FAILED
      ? 'its deletion failed: resolve it first (the copy is on the attention list)'
      : 'it is being deleted: wait for the deletion to end';
  return new OpstateError(
    OpstateErrorCode.CONFLICT,
    `rolling back ${facts.artifact.type} ${facts.artifact.id} to '${to}' would have '${copy.stage}' produce ${describe(copy)} again, which is ${copy.status}; ${what}, then roll back; nothing was changed`,
    {
      details: {
        artifact: facts.artifact.id,
        stage: copy.stage,
        copyId: copy.id,
        status: copy.status,
      },
    },
  );
}

/**
 * Decides a rollback of an artifact (a raw data package or data transfer package) to a stage of
 * its pipeline: the stage and every later stage are redone. Their operations in the artifact's
 * family are superseded (a raw data package's own per-package operations and its bundle's; a
 * transfer package's own and each member's), the target stage's operations are created again
 * from the newest one's fields and inputs, and the pipeline's pass creates each later stage once
 * from the re-run's completions. Refused, naming what is wrong: `BAD_INPUT` for a stage the
 * pipeline does not have, one before a transfer package's first stage, or one the artifact never
 * reached; `CONFLICT` when an operation to redo is live (it must settle first) or a copy it would
 * produce again is being deleted or failed its deletion; `UNSAFE` when the re-run would read a
 * copy that is gone, which would leave that artifact with nothing to produce it again from.
 *
 * @example
 * ```ts
 * const plan = planRollback({ pipeline, locations, stage: 'bundling', facts });
 * plan.redone.map((r) => r.stage); // ['bundling', 'transfer-1', 'unpack-1']
 * ```
 */
export function planRollback(input: {
  readonly pipeline: Pipeline;
  readonly locations: ReadonlyMap<string, string>;
  readonly stage: string;
  readonly facts: RollbackFacts;
}): RollbackPlan {
  const { pipeline, locations, stage: to, facts } = input;
  const target = pipeline.stages[to];
  if (target === undefined || !Object.hasOwn(pipeline.stages, to)) {
    throw bad(
      `pipeline '${pipeline.name}' has no stage '${to}'; its stages: ${pipeline.order.join(', ')}`,
      { stage: to },
    );
  }
  const a = facts.artifact;
  if (a.type === ArtifactType.DATA_TRANSFER_PACKAGE) {
    const first = pipeline.order.find(
      (n) =>
        STAGE_ARTIFACTS[(pipeline.stages[n] as PipelineStage).kind].subject ===
        ArtifactType.DATA_TRANSFER_PACKAGE,
    );
    if (first !== undefined && first !== to && stagesFrom(pipeline, to).includes(first)) {
      throw bad(
        `stage '${to}' comes before data transfer package ${a.id}'s first stage '${first}'; roll back one of its raw data packages to '${to}' instead`,
        { stage: to, first },
      );
    }
  }
  const stages = stagesFrom(pipeline, to);
  const current = facts.operations.filter((o) => o.supersededBy === null);
  const widens = afterBundleStage(pipeline, stages);
  const opsOf = (name: string): RollbackOperation[] => {
    const s = pipeline.stages[name] as PipelineStage;
    const subjects = new Set(subjectsOf(s, facts, widens.get(name) === true));
    return current.filter((o) => subjects.has(o.subjectId) && ofStage(s, locations, o));
  };
  const targetOps = opsOf(to);
  if (targetOps.length === 0) {
    throw bad(
      `${a.type} ${a.id} never reached stage '${to}' (no operation of it there); roll back to a stage it reached`,
      { stage: to, artifact: a.id },
    );
  }
  const redone: RedoneOperation[] = [];
  const redoneOps: RollbackOperation[] = [];
  for (const name of stages) {
    for (const o of opsOf(name)) {
      if (LIVE.has(o.status)) {
        throw new OpstateError(
          OpstateErrorCode.CONFLICT,
          `operation ${o.id} of stage '${name}' is ${o.status}; a rollback redoes settled stages only: wait for it to settle, or cancel it (opstate cancel ${o.id}), then roll back`,
          { details: { stage: name, operationId: o.id, status: o.status } },
        );
      }
      redone.push({
        stage: name,
        operationId: o.id,
        kind: o.kind,
        status: o.status,
        subjectId: o.subjectId,
      });
      redoneOps.push(o);
    }
  }
  const superseded: SupersededCopy[] = [];
  const seen = new Set<string>();
  for (const r of redone) {
    const o = redoneOps.find((x) => x.id === r.operationId) as RollbackOperation;
    for (const c of o.outputs) {
      if (seen.has(c.id)) continue;
      seen.add(c.id);
      superseded.push({ ...c, stage: r.stage, producedBy: o.id });
    }
  }
  const deleting = superseded.find((c) => DELETING.has(c.status));
  if (deleting !== undefined) throw outputBeingDeleted(facts, to, deleting);
  // One new operation per subject of the target stage, as its newest operation was made.
  const newestOf = (subjectId: string): RollbackOperation =>
    targetOps
      .filter((o) => o.subjectId === subjectId)
      .reduce((x, y) => (y.createdAt > x.createdAt ? y : x));
  const creates: RollbackCreation[] = [];
  for (const subjectId of new Set(targetOps.map((o) => o.subjectId))) {
    const newest = newestOf(subjectId);
    const fields: Record<string, string> = {};
    for (const [k, v] of Object.entries(newest.fields)) if (v !== null) fields[k] = v;
    creates.push({
      stage: to,
      kind: newest.kind,
      subjectId,
      fields,
      inputs: newest.inputs.map((c) => c.id),
    });
  }
  // The re-run reads what the target stage's newest operations and the later redone ones read; a
  // copy a redone operation produced is produced again, any other must still be there.
  const reads = [
    ...creates.map((c) => ({ stage: to, inputs: newestOf(c.subjectId).inputs })),
    ...redoneOps
      .filter((o) => !targetOps.includes(o))
      .map((o) => ({
        stage: redone.find((r) => r.operationId === o.id)?.stage as string,
        inputs: o.inputs,
      })),
  ];
  for (const r of reads) {
    for (const c of r.inputs) {
      if (seen.has(c.id) || c.status === 'PRESENT') continue;
      throw goneInput(facts, to, r.stage, c, seen);
    }
  }
  // The bundle-mates some redone operation acts on (their later stages, after a bundle stage).
  const redoneSubjects = new Set(redone.map((r) => r.subjectId));
  const widened =
    a.type === ArtifactType.RAW_DATA_PACKAGE
      ? a.bundleMembers.filter((m) => m !== a.id && redoneSubjects.has(m))
      : [];
  return {
    pipeline: pipeline.name,
    artifact: { type: a.type, id: a.id },
    stage: to,
    stages,
    redone,
    creates,
    superseded,
    widened,
  };
}
