import { ArtifactType } from './ArtifactType.ts';
import { describeValue } from './describeValue.ts';
import { isOperationKind, OPERATION_KINDS, OperationKind } from './OperationKind.ts';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';

/** A registered location a pipeline names, by its site and name (resolved when it is loaded). */
export interface PipelineLocation {
  readonly site: string;
  readonly name: string;
}

/**
 * One stage: the operation a completion of the stage it follows creates.
 * - `kind`: what it creates;
 * - `after`: the stage whose completed operations it follows; none for an entry stage, whose
 *   operations are submitted, or, for a packaging, created by the pass once its package's files
 *   are declared complete at `at` (`artifacts.declareFilesComplete`); its completions start the
 *   chain;
 * - `at`: the location it runs at (the routed location: the destination of a transfer, a
 *   long-term archive or a staging; the location of the others), a name of `locations`;
 * - `from`: where a transfer, long-term archive or staging reads, a name of `locations`; the
 *   other kinds read where they run.
 */
export interface PipelineStage {
  readonly kind: OperationKind;
  readonly after?: string;
  readonly at: string;
  readonly from?: string;
}

/** What `definePipeline` takes. */
export interface PipelineSpec {
  /** Names the pipeline (its cursor row, the `by` of what it creates): letters, digits, `-`. */
  readonly name: string;
  readonly locations: Readonly<Record<string, PipelineLocation>>;
  readonly stages: Readonly<Record<string, PipelineStage>>;
}

/** A checked pipeline: stages in the order they run (each after the one it follows). */
export interface Pipeline extends PipelineSpec {
  readonly order: readonly string[];
}

/** The artifact a kind's operation acts on (its subject) and the copies it consumes. */
export const STAGE_ARTIFACTS: Readonly<
  Record<OperationKind, { readonly subject: ArtifactType; readonly consumes: ArtifactType }>
> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: {
    subject: ArtifactType.RAW_DATA_PACKAGE,
    consumes: ArtifactType.RAW_DATA_FILE,
  },
  [OperationKind.DATA_TRANSFER_PACKAGE]: {
    subject: ArtifactType.DATA_TRANSFER_PACKAGE,
    consumes: ArtifactType.RAW_DATA_PACKAGE,
  },
  [OperationKind.TRANSFER]: {
    subject: ArtifactType.DATA_TRANSFER_PACKAGE,
    consumes: ArtifactType.DATA_TRANSFER_PACKAGE,
  },
  [OperationKind.UNPACK]: {
    subject: ArtifactType.DATA_TRANSFER_PACKAGE,
    consumes: ArtifactType.DATA_TRANSFER_PACKAGE,
  },
  [OperationKind.LONG_TERM_ARCHIVE]: {
    subject: ArtifactType.RAW_DATA_PACKAGE,
    consumes: ArtifactType.RAW_DATA_PACKAGE,
  },
  [OperationKind.STAGING]: {
    subject: ArtifactType.RAW_DATA_PACKAGE,
    consumes: ArtifactType.RAW_DATA_PACKAGE,
  },
});

/** The artifact type of the copies a kind's completion produces at the location it runs at. */
export const STAGE_PRODUCES: Readonly<Record<OperationKind, ArtifactType>> = Object.freeze({
  [OperationKind.RAW_DATA_PACKAGE]: ArtifactType.RAW_DATA_PACKAGE,
  [OperationKind.DATA_TRANSFER_PACKAGE]: ArtifactType.DATA_TRANSFER_PACKAGE,
  [OperationKind.TRANSFER]: ArtifactType.DATA_TRANSFER_PACKAGE,
  [OperationKind.UNPACK]: ArtifactType.RAW_DATA_PACKAGE,
  [OperationKind.LONG_TERM_ARCHIVE]: ArtifactType.RAW_DATA_PACKAGE,
  [OperationKind.STAGING]: ArtifactType.RAW_DATA_PACKAGE,
});

/** The kinds that read at one location and write at another (`from` → `at`). */
const MOVES: ReadonlySet<OperationKind> = new Set([
  OperationKind.TRANSFER,
  OperationKind.LONG_TERM_ARCHIVE,
  OperationKind.STAGING,
]);

const NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;

/** Where a stage reads its input copies. */
export const readsAt = (stage: PipelineStage): string => stage.from ?? stage.at;

function refused(problem: string, details: Record<string, unknown> = {}): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, `pipeline refused: ${problem}`, { details });
}

/** Each stage's own problems: its kind, its locations, the stage it follows. */
function checkStage(spec: PipelineSpec, name: string, stage: PipelineStage): void {
  if (!isOperationKind(stage.kind)) {
    throw refused(
      `stage '${name}' has unknown kind ${describeValue(stage.kind)}; use one of ${OPERATION_KINDS.join(', ')}`,
      { stage: name },
    );
  }
  for (const role of ['at', 'from'] as const) {
    const ref = stage[role];
    if (ref === undefined) continue;
    if (!Object.hasOwn(spec.locations, ref)) {
      throw refused(
        `stage '${name}' names unknown location '${ref}' (${role}); known: ${Object.keys(spec.locations).join(', ') || 'none'}`,
        { stage: name, location: ref },
      );
    }
  }
  if (typeof stage.at !== 'string') throw refused(`stage '${name}' has no location (at)`);
  if (MOVES.has(stage.kind) !== (stage.from !== undefined)) {
    throw refused(
      MOVES.has(stage.kind)
        ? `stage '${name}' (${stage.kind}) needs 'from', the location it reads from`
        : `stage '${name}' (${stage.kind}) reads where it runs; drop 'from'`,
      { stage: name },
    );
  }
  if (stage.after !== undefined && !Object.hasOwn(spec.stages, stage.after)) {
    throw refused(`stage '${name}' follows unknown stage '${stage.after}'`, { stage: name });
  }
}

/** The stages in run order; refuses a cycle, naming the stages on it. */
function runOrder(spec: PipelineSpec): string[] {
  const order: string[] = [];
  const placed = new Set<string>();
  for (const start of Object.keys(spec.stages)) {
    const path: string[] = [];
    let at: string | undefined = start;
    while (at !== undefined && !placed.has(at)) {
      if (path.includes(at)) {
        const loop = [...path.slice(path.indexOf(at)), at];
        throw refused(
          `stages ${loop.map((s) => `'${s}'`).join(' → ')} form a cycle: none of them can ever be reached`,
          { cycle: loop },
        );
      }
      path.push(at);
      at = spec.stages[at]?.after;
    }
    for (const s of path.reverse()) {
      placed.add(s);
      order.push(s);
    }
  }
  return order;
}

/** A stage whose predecessor's copies it could never consume is never reached: refused. */
function checkReachable(spec: PipelineSpec, name: string, stage: PipelineStage): void {
  if (stage.after === undefined) return;
  const before = spec.stages[stage.after] as PipelineStage;
  const produced = STAGE_PRODUCES[before.kind];
  const consumes = STAGE_ARTIFACTS[stage.kind].consumes;
  if (produced !== consumes) {
    throw refused(
      `stage '${name}' (${stage.kind}) can never be reached: it consumes ${consumes} copies, but '${stage.after}' (${before.kind}) produces ${produced} copies`,
      { stage: name },
    );
  }
  if (readsAt(stage) !== before.at) {
    throw refused(
      `stage '${name}' can never be reached: it reads at '${readsAt(stage)}', but '${stage.after}' writes at '${before.at}'`,
      { stage: name },
    );
  }
}

/** Two stages creating the same (kind, location): only one would ever be created. */
function checkDistinct(spec: PipelineSpec): void {
  const seen = new Map<string, string>();
  for (const [name, stage] of Object.entries(spec.stages)) {
    const at = spec.locations[stage.at] as PipelineLocation;
    const key = `${stage.kind}@${at.site}/${at.name}`;
    const other = seen.get(key);
    if (other !== undefined) {
      throw refused(
        `stages '${other}' and '${name}' both create ${stage.kind} at ${spec.locations[stage.at]?.site}/${spec.locations[stage.at]?.name}: one operation per (kind, subject, location) is live at a time, so '${name}' could never be reached`,
        { stage: name, other },
      );
    }
    seen.set(key, name);
  }
}

/**
 * Checks a pipeline definition and returns it with its stages in run order. Pure: the locations
 * are resolved against the registered ones when a runtime loads it. Refused with `BAD_INPUT`
 * naming the stage (nothing loaded): an unknown kind, location or stage followed; a cycle; a
 * stage that can never be reached (it consumes copies its predecessor does not produce, reads at
 * a location its predecessor does not write at, or repeats another stage's kind and location); a
 * move (transfer, long-term archive, staging) without `from`, or another kind with one.
 *
 * @example
 * ```ts
 * const pipeline = definePipeline({
 *   name: 'preservation',
 *   locations: { source: { site: 'obs', name: 'source' }, buffer: { site: 'cologne', name: 'buffer' } },
 *   stages: {
 *     packaging: { kind: OperationKind.RAW_DATA_PACKAGE, at: 'source' },
 *     bundling: { kind: OperationKind.DATA_TRANSFER_PACKAGE, after: 'packaging', at: 'source' },
 *     transfer: { kind: OperationKind.TRANSFER, after: 'bundling', from: 'source', at: 'buffer' },
 *   },
 * });
 * ```
 */
export function definePipeline(spec: PipelineSpec): Pipeline {
  if (typeof spec?.name !== 'string' || !NAME.test(spec.name)) {
    throw refused(`name must be 1 to 64 letters, digits and '-'; got ${describeValue(spec?.name)}`);
  }
  const stages = Object.entries(spec.stages ?? {});
  if (stages.length === 0) throw refused(`pipeline '${spec.name}' has no stage`);
  for (const [name, stage] of stages) checkStage(spec, name, stage);
  const order = runOrder(spec);
  for (const [name, stage] of stages) checkReachable(spec, name, stage);
  checkDistinct(spec);
  return Object.freeze({ ...spec, order });
}

/** The locations of the default pipeline: one source, and per destination site its buffer and archive. */
export interface DefaultPipelineLocations {
  readonly source: PipelineLocation;
  readonly destinations: readonly {
    readonly buffer: PipelineLocation;
    readonly archive: PipelineLocation;
  }[];
}

/**
 * The pipeline of the source documents: raw data files at a source are packaged (the entry
 * stage, submitted), the packages bundled there, the bundle transferred to each destination
 * site's buffer, unpacked there, and each package archived from the buffer into the site's
 * long-term archive. Stage names: `packaging`, `bundling`, and per destination `n` (from 1)
 * `transfer-n`, `unpack-n`, `archive-n`.
 *
 * @example
 * ```ts
 * const pipeline = defaultPipeline({ source, destinations: [{ buffer, archive }] });
 * ```
 */
export function defaultPipeline(
  locations: DefaultPipelineLocations,
  name = 'preservation',
): Pipeline {
  const locs: Record<string, PipelineLocation> = { source: locations.source };
  const stages: Record<string, PipelineStage> = {
    packaging: { kind: OperationKind.RAW_DATA_PACKAGE, at: 'source' },
    bundling: { kind: OperationKind.DATA_TRANSFER_PACKAGE, after: 'packaging', at: 'source' },
  };
  locations.destinations.forEach((d, i) => {
    const n = i + 1;
    locs[`buffer-${n}`] = d.buffer;
    locs[`archive-${n}`] = d.archive;
    stages[`transfer-${n}`] = {
      kind: OperationKind.TRANSFER,
      after: 'bundling',
      from: 'source',
      at: `buffer-${n}`,
    };
    stages[`unpack-${n}`] = {
      kind: OperationKind.UNPACK,
      after: `transfer-${n}`,
      at: `buffer-${n}`,
    };
    stages[`archive-${n}`] = {
      kind: OperationKind.LONG_TERM_ARCHIVE,
      after: `unpack-${n}`,
      from: `buffer-${n}`,
      at: `archive-${n}`,
    };
  });
  return definePipeline({ name, locations: locs, stages });
}
