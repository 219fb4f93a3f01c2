import { ArtifactType } from '../machines/ArtifactType.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import {
  type Pipeline,
  type PipelineStage,
  readsAt,
  STAGE_ARTIFACTS,
} from '../machines/pipeline.ts';
import type { BundleMembers, CompletedOperation } from '../machines/pipelineFacts.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import type { AdoptedEntry } from '../persistence/createPipelineOperations.ts';
import type { EntryDue } from '../persistence/reads/selectEntriesDue.ts';

export type { BundleMembers, CompletedOperation, StageOutput } from '../machines/pipelineFacts.ts';

/** What the pass decided to create: the next stage's operation and the subject it is keyed on. */
export interface PipelineCreation {
  readonly stage: string;
  readonly subjectId: string;
  readonly input: CreateOperationInput;
  /** The rollback the completion it follows was created for (carried down the chain), if any. */
  readonly rollbackId: string | null;
  /**
   * The completed operation it follows: a rollback that redoes it before the write drops it. None
   * for an entry stage's packaging, which follows a "files complete" fact (`entry`).
   */
  readonly causeId?: string;
  readonly entry?: boolean;
}

/** The key a stage's operation is unique on while live: (kind, subject, target location). */
export const stageKey = (kind: OperationKind, subjectId: string, locationId: string): string =>
  `${kind}|${subjectId}|${locationId}`;

/** The subtype field naming a kind's subject. */
const SUBJECT_FIELD = (kind: OperationKind) =>
  STAGE_ARTIFACTS[kind].subject === ArtifactType.RAW_DATA_PACKAGE
    ? 'rawDataPackageId'
    : 'dataTransferPackageId';

/** The stage a completed operation is a completion of: its kind, where it ran and read. */
function stageOf(
  pipeline: Pipeline,
  locations: ReadonlyMap<string, string>,
  op: CompletedOperation,
): string | undefined {
  return pipeline.order.find((name) => {
    const s = pipeline.stages[name] as PipelineStage;
    if (s.kind !== op.kind || locations.get(s.at) !== op.targetLocationId) return false;
    return s.from === undefined || op.fields.sourceLocationId === locations.get(s.from);
  });
}

function fieldsOf(
  stage: PipelineStage,
  subjectId: string,
  locations: ReadonlyMap<string, string>,
): Record<string, string> {
  const at = locations.get(stage.at) as string;
  const subject = { [SUBJECT_FIELD(stage.kind)]: subjectId };
  return stage.from === undefined
    ? { ...subject, locationId: at }
    : {
        ...subject,
        sourceLocationId: locations.get(stage.from) as string,
        destinationLocationId: at,
      };
}

/** The (subject, inputs) pairs a completion offers a next stage. */
function candidates(
  next: PipelineStage,
  op: CompletedOperation,
  readAt: string,
  bundles: ReadonlyMap<string, BundleMembers>,
): { subjectId: string; inputs: string[] }[] {
  const copies = op.outputs.filter((o) => o.present && o.locationId === readAt);
  const subject = STAGE_ARTIFACTS[next.kind].subject;
  if (next.kind !== OperationKind.DATA_TRANSFER_PACKAGE) {
    return copies
      .filter((c) => c.artifactType === subject)
      .map((c) => ({ subjectId: c.artifactId, inputs: [c.copyId] }));
  }
  // Fan-in: the bundle is due once every member package has a present copy where it is built.
  return copies.flatMap((c) => {
    const b = bundles.get(c.artifactId);
    if (b === undefined || b.copies.length === 0 || b.copies.some((x) => x === null)) return [];
    return [{ subjectId: b.dataTransferPackageId, inputs: b.copies as string[] }];
  });
}

/**
 * The pipeline pass, pure: for each completion read, the operations of the stages that follow
 * its stage, unless an operation of that (kind, subject, target location) exists in any status
 * (`existing`: live, completed, or FAILED — a stage that failed for good stops its branch until it
 * is retried and completes) or this pass already plans it. A completion of no stage, or of a stage
 * nothing follows, plans nothing; a bundle whose members are not all packaged waits for the
 * completion of the last one.
 *
 * @example
 * ```ts
 * const creations = planPipelinePass({ pipeline, locations, completed, bundles, existing, by: 'pipeline:preservation' });
 * ```
 */
export function planPipelinePass(input: {
  readonly pipeline: Pipeline;
  /** The pipeline's location names resolved to registered location ids. */
  readonly locations: ReadonlyMap<string, string>;
  readonly completed: readonly CompletedOperation[];
  /** Per raw data package a completion produced: its bundle's members at the bundling location. */
  readonly bundles: ReadonlyMap<string, BundleMembers>;
  /** `stageKey`s of the operations that exist, in any status. */
  readonly existing: ReadonlySet<string>;
  readonly by: string;
}): PipelineCreation[] {
  const { pipeline, locations, existing, bundles, by } = input;
  const planned = new Set<string>();
  const creations: PipelineCreation[] = [];
  for (const op of input.completed) {
    const done = stageOf(pipeline, locations, op);
    if (done === undefined) continue;
    for (const name of pipeline.order) {
      const next = pipeline.stages[name] as PipelineStage;
      if (next.after !== done) continue;
      const at = locations.get(next.at) as string;
      const readAt = locations.get(readsAt(next)) as string;
      for (const c of candidates(next, op, readAt, bundles)) {
        const key = stageKey(next.kind, c.subjectId, at);
        if (existing.has(key) || planned.has(key)) continue;
        planned.add(key);
        creations.push({
          stage: name,
          subjectId: c.subjectId,
          rollbackId: op.rollbackId ?? null,
          causeId: op.id,
          // Built per kind by `fieldsOf`; the store checks them against the kind's table again.
          input: {
            kind: next.kind,
            fields: fieldsOf(next, c.subjectId, locations),
            inputs: c.inputs,
            by,
          } as unknown as CreateOperationInput,
        });
      }
    }
  }
  return creations;
}

/**
 * The pipeline's entry stages, pure: for each raw data package whose files were declared complete
 * at the location an entry packaging stage runs at, that packaging, reading the files' copies
 * there; adopted instead when a packaging of it exists already (submitted, or created before).
 * (A fact one of whose files has no PRESENT copy there is not due: `selectEntriesDue` leaves it.) A fact at a location no entry stage runs at
 * is left for the pipeline that has one.
 *
 * @example
 * ```ts
 * const { creations, adopted } = planEntries({ pipeline, locations, due, by: 'pipeline:preservation' });
 * ```
 */
export function planEntries(input: {
  readonly pipeline: Pipeline;
  readonly locations: ReadonlyMap<string, string>;
  readonly due: readonly EntryDue[];
  readonly by: string;
}): { creations: PipelineCreation[]; adopted: AdoptedEntry[] } {
  const { pipeline, locations, by } = input;
  const creations: PipelineCreation[] = [];
  const adopted: AdoptedEntry[] = [];
  for (const e of input.due) {
    const name = entryStages(pipeline).find(
      (n) => locations.get((pipeline.stages[n] as PipelineStage).at) === e.locationId,
    );
    if (name === undefined) continue;
    if (e.existingId !== null) {
      adopted.push({ rawDataPackageId: e.rawDataPackageId, operationId: e.existingId });
      continue;
    }
    // Its files moved to another package since it was declared: nothing to package.
    if (e.inputs.length === 0) continue;
    const stage = pipeline.stages[name] as PipelineStage;
    creations.push({
      stage: name,
      subjectId: e.rawDataPackageId,
      rollbackId: null,
      entry: true,
      input: {
        kind: stage.kind,
        fields: fieldsOf(stage, e.rawDataPackageId, locations),
        inputs: [...e.inputs],
        by,
      } as unknown as CreateOperationInput,
    });
  }
  return { creations, adopted };
}

/** The stages a "files complete" fact starts: packagings that follow no stage. */
export const entryStages = (pipeline: Pipeline): string[] =>
  pipeline.order.filter((n) => {
    const s = pipeline.stages[n] as PipelineStage;
    return s.after === undefined && s.kind === OperationKind.RAW_DATA_PACKAGE;
  });
