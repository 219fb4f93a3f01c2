/**
 * The records the public API takes and returns (`runtime.get`, `runtime.artifacts`,
 * `runtime.limits`, the handler context), declared apart from the code that reads and writes them
 * so that the published types carry no database types. The repositories re-export them.
 */
import type { ArtifactType } from '../machines/ArtifactType.ts';
import type { OperationEffect } from '../machines/decide.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import type {
  OperationContext,
  OperationError,
  OperationStatus,
} from '../machines/operationMachine.ts';
import type { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import type { StoredTransition } from '../machines/replayTransitions.ts';
import type { LocationType, Route } from '../machines/routing.ts';
import type { SnapshotEnvelope } from '../machines/snapshotEnvelope.ts';
import type { UnreadableValue } from './UnreadableValue.ts';

/**
 * The runtime's database connection, as the public API hands it on (`runtime.database`, to
 * `startDashboard`; a handler's `ctx.withDatabase`): what it runs on, and closing it. The runtime
 * closes its own on `close()`.
 */
export interface DatabaseHandle {
  readonly dialect: 'postgres' | 'pglite';
  close(): Promise<void>;
}

/** A copy an operation produced: one artifact at one location. */
export interface OutputCopy {
  readonly artifactType: ArtifactType;
  readonly artifactId: string;
  readonly locationId: string;
  readonly path?: string | null;
  readonly checksum?: string | null;
  readonly size?: number | null;
}

export interface PhysicalCopyRecord {
  readonly id: string;
  readonly artifactType: ArtifactType;
  readonly artifactId: string;
  readonly locationId: string;
  readonly status: PhysicalCopyStatus;
  readonly path: string | null;
  readonly checksum: string | null;
  readonly size: number | null;
  readonly deletionFailureCount: number;
  readonly lastError: string | null;
  /** Compare-and-set counter of the copy's status (see `CopyLifecycle`). */
  readonly version: number;
  readonly createdAt: Date;
}

/** A storage location as registered: a site's buffer, source, archive or processing area. */
export interface DataLocation {
  readonly id: string;
  readonly site: string;
  readonly name: string;
  readonly locationType: LocationType;
  readonly storageRoot: string;
}

/** A raw data package to register, optionally already bundled into a data transfer package. */
export interface NewRawDataPackage {
  readonly name: string;
  readonly dataTransferPackageId?: string;
  readonly checksum?: string;
  readonly size?: number;
}

/** A data transfer package to register. */
export interface NewDataTransferPackage {
  readonly name: string;
  readonly checksum?: string;
  readonly size?: number;
}

/** A raw data file to register, optionally already in a raw data package. */
export interface NewRawDataFile {
  readonly name: string;
  readonly rawDataPackageId?: string;
  readonly checksum?: string;
  readonly size?: number;
}

/** A durable checkpoint a handler recorded inside IN_PROGRESS. */
export interface OperationStep {
  readonly operationId: string;
  readonly attempt: number;
  /** The plan generation the step belongs to: 1, then one more for each operator re-plan. */
  readonly generation: number;
  readonly name: string;
  readonly state: string;
  /**
   * The JSON value the step recorded, exactly as it was given (a string stays a string, however
   * much it looks like JSON); `undefined` when the step recorded none.
   */
  readonly result: unknown;
  readonly at: Date;
}

/**
 * One row of the append-only transition history: the stored transition (`StoredTransition`, what
 * a replay reads) without its row id and the failure breadcrumb a replay joins in.
 *
 * @example
 * ```ts
 * const path = (await journal.listTransitions(id)).map((t: TransitionEntry) => `${t.event} by ${t.by}`);
 * ```
 */
export type TransitionEntry = Omit<StoredTransition, 'id' | 'error'>;

/** A failure breadcrumb, keyed by (kind, operation id, attempt). */
export interface FailureEvent {
  readonly kind: OperationKind;
  readonly operationId: string;
  readonly attempt: number;
  readonly error: unknown;
  readonly at: Date;
}

export interface ArtifactRef {
  readonly type: ArtifactType;
  readonly id: string;
  readonly name: string;
}

/** One input copy of an operation with the artifact relations around it. */
export interface InputRelations {
  /** The input copy (`operation_input`). */
  readonly copyId: string;
  readonly locationId: string;
  readonly path: string | null;
  /** The artifact it is a copy of. */
  readonly artifact: ArtifactRef;
  /**
   * What the artifact belongs to: a raw data file's raw data package, a raw data package's data
   * transfer package. Null for a data transfer package, or an artifact not assigned to one yet.
   */
  readonly partOf: ArtifactRef | null;
  /**
   * What the artifact holds, sorted by name: a data transfer package's raw data packages, a raw
   * data package's raw data files. Empty for a raw data file.
   */
  readonly members: readonly ArtifactRef[];
}

/** Everything an operator needs to know about one operation. */
export interface OperationInspection {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly retryCount: number;
  readonly maxRetries: number;
  readonly version: number;
  readonly route: Route;
  readonly queue: string;
  readonly groupId: string | null;
  readonly workerId: string | null;
  readonly notBefore: Date | null;
  readonly createdAt: Date;
  readonly scheduledAt: Date | null;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  /** Its own deadline per attempt (ms) from submit; null: its kind's. */
  readonly deadlineMs: number | null;
  /** Higher is claimed first (-100…100), given at submit. */
  readonly priority: number;
  readonly lastError: OperationError | null;
  readonly envelope: SnapshotEnvelope;
  /** The subtype's stage-specific fields, by camelCase key. */
  readonly fields: Readonly<Record<string, string | null>>;
  readonly inputs: readonly PhysicalCopyRecord[];
  readonly outputs: readonly PhysicalCopyRecord[];
  readonly transitions: readonly TransitionEntry[];
  readonly steps: readonly OperationStep[];
  readonly failures: readonly FailureEvent[];
  /**
   * Stored values of the operation's row that cannot be read (a damaged snapshot or error
   * record), each with the row's text; everything else is shown as usual. Empty for a sound row.
   */
  readonly unreadable: readonly UnreadableValue[];
}

/** What a limit applies to: a location (its id or `site/name`), and a kind or any kind. */
export interface FlowLimitScope {
  /** The location's id, or `site/name` as it was registered. */
  readonly location: string;
  /** One kind; absent (or null) for every kind at the location together. */
  readonly kind?: OperationKind | string | null;
}

/** A limit to set: at most `max` operations SCHEDULED or IN_PROGRESS at once in its scope. */
export interface FlowLimitInput extends FlowLimitScope {
  /** A whole number from 0 (nothing new starts there) to `MAX_FLOW_LIMIT`. */
  readonly max: number;
  /** Who sets it, as `opstate limit list` shows (default `operator`). */
  readonly by?: string;
}

/** A limit as it stands, with what is live in its scope now. */
export interface FlowLimit {
  readonly locationId: string;
  /** `site/name` of the location. */
  readonly location: string;
  /** The kind it caps; null for every kind at the location together. */
  readonly kind: OperationKind | null;
  readonly max: number;
  /** Operations SCHEDULED or IN_PROGRESS in its scope when it was read. */
  readonly live: number;
  readonly updatedAt: Date;
  readonly updatedBy: string;
}

/** A staging on request: a raw data package copied from its archive to a processing location. */
export interface StageRequest {
  /** The raw data package's id. */
  readonly package: string;
  /** The processing location to stage into: its id, or `site/name` as it was registered. */
  readonly to: string;
  /** Who asked, recorded on the group and the operation (default: the runtime's `serviceName`). */
  readonly by?: string;
}

/**
 * A staging created on request: the active operation group that holds the retention claim, and
 * its STAGING operation (PENDING), which reads the verified archive copy `from`.
 */
export interface StagedOnRequest {
  readonly groupId: string;
  readonly operationId: string;
  readonly package: string;
  /** The archive copy it stages from, which the group's claim holds. */
  readonly from: {
    readonly copyId: string;
    readonly locationId: string;
    /** `site/name` of the archive location. */
    readonly location: string;
  };
  /** The processing location it stages into. */
  readonly to: {
    readonly locationId: string;
    /** `site/name` of the processing location. */
    readonly location: string;
  };
}

/** A released retention claim: the group, when and by whom. */
export interface ReleasedClaim {
  readonly groupId: string;
  readonly releasedAt: Date;
  readonly releasedBy: string;
}

/** A rollback up a pipeline's lineage, as `runtime.rollback` takes it. */
export interface RollbackRequest {
  /** The raw data package's or data transfer package's id. */
  readonly artifact: string;
  /** The stage of the pipeline to redo from (it and every later stage are redone). */
  readonly to: string;
  /** Who asks, recorded on the rollback and its operations (default: the runtime's `serviceName`). */
  readonly by?: string;
  /** Decide and return the plan, change nothing. */
  readonly dryRun?: boolean;
}

/** A rollback decided (and, unless `dryRun`, done): what it redoes and what it created. */
export interface PipelineRollback {
  /** The `pipeline_rollback` row's id; null on a dry run. */
  readonly rollbackId: string | null;
  readonly dryRun: boolean;
  readonly pipeline: string;
  readonly artifact: {
    readonly type: 'raw_data_package' | 'data_transfer_package';
    readonly id: string;
  };
  /** The target stage. */
  readonly stage: string;
  /** The target stage and every later stage, in run order: each runs again once. */
  readonly stages: readonly string[];
  readonly by: string;
  readonly at: Date;
  /** The operations redone, marked superseded by the rollback (unless dry). */
  readonly redone: readonly {
    readonly stage: string;
    readonly operationId: string;
    readonly kind: string;
    readonly status: string;
    readonly subjectId: string;
  }[];
  /**
   * The target stage's new operations (PENDING), created with the rollback; their ids are null on
   * a dry run. Each later stage's operation is created by the pipeline's pass from the re-run.
   */
  readonly created: readonly {
    readonly stage: string;
    readonly operationId: string | null;
    readonly kind: string;
    readonly subjectId: string;
    readonly inputs: readonly string[];
  }[];
  /** The copies the redone operations produced: the re-run produces each again. */
  readonly superseded: readonly {
    readonly copyId: string;
    readonly artifactType: string;
    readonly artifactId: string;
    /** `site/name`. */
    readonly location: string;
    readonly status: string;
    readonly stage: string;
  }[];
  /**
   * Raw data packages besides the one rolled back whose later stages are redone too: its bundle's
   * other members, once a stage of the bundle (bundling, transfer, unpack) is redone, since that
   * stage produces every member again. Empty otherwise.
   */
  readonly widened: readonly string[];
}

/**
 * The stage-specific fields of each kind, by its value. Written out here so that the published
 * types need no database types; `subtypeFields.ts` holds them equal to the kind's subtype table
 * (a compile error the moment a column and this table differ).
 */
export interface OperationFieldsByKind {
  readonly raw_data_package: {
    readonly rawDataPackageId: string;
    readonly locationId: string;
  };
  readonly data_transfer_package: {
    readonly dataTransferPackageId: string;
    readonly locationId: string;
  };
  readonly transfer: {
    readonly dataTransferPackageId: string;
    readonly sourceLocationId: string;
    readonly destinationLocationId: string;
  };
  readonly unpack: {
    readonly dataTransferPackageId: string;
    readonly locationId: string;
  };
  readonly long_term_archive: {
    readonly rawDataPackageId: string;
    readonly sourceLocationId: string;
    readonly destinationLocationId: string;
    readonly archiveKey?: string | null | undefined;
  };
  readonly staging: {
    readonly rawDataPackageId: string;
    readonly sourceLocationId: string;
    readonly destinationLocationId: string;
  };
}
/**
 * The stage-specific fields of a kind, as `submit` takes them: a misspelt or missing field is a
 * compile error, and `subtypeFields.ts` holds them equal to the kind's subtype table. A
 * required column is a required key; a nullable one may be left out, `null` or `undefined`.
 *
 * @example
 * ```ts
 * const fields: OperationFields<OperationKind.TRANSFER> = {
 *   dataTransferPackageId, sourceLocationId, destinationLocationId,
 * };
 * ```
 */
export type OperationFields<K extends OperationKind> = OperationFieldsByKind[K];

/** What every create request may say besides its kind and fields. */
export interface CreateOperationOptions {
  /** Physical copy ids the operation consumes. */
  readonly inputs?: readonly string[];
  /**
   * Choose the id (a uuid) instead of a new time-ordered one (`timeOrderedId`): creating with the
   * same id twice is a CONFLICT. Any uuid is accepted; time-ordered ones keep the indexes' writes
   * on few pages as the history grows.
   */
  readonly id?: string;
  readonly groupId?: string;
  readonly maxRetries?: number;
  /**
   * How long one attempt may stay IN_PROGRESS from its START (ms), instead of the kind's deadline
   * (`OPSTATE_DEADLINES`): past it the worker aborts the handler (`ctx.signal`) and the control
   * plane resets the attempt by `deadline`, whatever its heartbeats say. A whole number from 1 to
   * `MAX_DEADLINE_MS` (7 days).
   */
  readonly deadlineMs?: number;
  /**
   * Delayed start: the operation stays PENDING, and no scheduler claims it, until this time (a
   * `Date`, or an ISO 8601 date-time with its zone such as `2026-12-05T18:00:00Z`). A time already
   * past means now. While it waits it is listed as waiting, never as stuck.
   */
  readonly notBefore?: Date | string;
  /**
   * Higher is claimed first among due operations, FIFO within one priority: a whole number from
   * `MIN_PRIORITY` (-100) to `MAX_PRIORITY` (100), default 0. An operation due for longer than the
   * control plane's `starvationAgeMs` is claimed as if at `MAX_PRIORITY`, so none waits forever.
   */
  readonly priority?: number;
  /**
   * Routing, when not the kind's default (must be one of the frozen routes). The queue is always
   * the routed location's (`ROUTED_LOCATION_FIELD`): this picks the operation type, and its
   * location type must be that location's.
   */
  readonly route?: Route;
  /**
   * Who submits, as the creation transition records it (`opstate inspect` shows it): a service
   * name or a person, 1 to 64 characters of letters, digits and `. _ : @ / -`, none of opstate's
   * own actors (`scheduler`, `heartbeat_monitor`, `deadline`, `reconciler`, `broker`). The store's default is
   * `operator`; a runtime's is its `serviceName`.
   */
  readonly by?: string;
}

/**
 * What a caller passes to create one operation: a union tagged by `kind`, so the compiler checks
 * `fields` against that kind's subtype table (a misspelt or missing field does not compile).
 *
 * @example
 * ```ts
 * const input: CreateOperationInput = {
 *   kind: OperationKind.TRANSFER,
 *   fields: { dataTransferPackageId, sourceLocationId, destinationLocationId },
 *   inputs: [copyId],
 *   by: 'ingest',
 * };
 * ```
 */
export type CreateOperationInput<K extends OperationKind = OperationKind> = K extends OperationKind
  ? CreateOperationOptions & {
      readonly kind: K;
      /** The kind's stage-specific fields, by camelCase key (the README's table lists them). */
      readonly fields: OperationFields<K>;
    }
  : never;
/** An event that was accepted and committed. Run `effects` other than `dispatch` now. */
export interface AppliedTransition {
  readonly ok: true;
  readonly id: string;
  readonly version: number;
  readonly from: OperationStatus;
  readonly status: OperationStatus;
  readonly context: OperationContext;
  readonly effects: readonly OperationEffect[];
}

export interface MigrateResult {
  /** Migrations applied by this call (0 when the schema was already current). */
  readonly applied: number;
  /** Migrations in the folder. */
  readonly total: number;
  /** Present when this call moved a deployment of before the schema out of `public` first. */
  readonly moved?: MovedFromPublic;
}

/** What `moveFromPublic` moved. */
export interface MovedFromPublic {
  readonly to: string;
  readonly tables: number;
  readonly functions: number;
  /** Rows of the migration record moved from `drizzle.__drizzle_migrations`. */
  readonly migrations: number;
}
export type EmbeddedEngine = 'postgres' | 'pglite';

/** The PGlite options opstate passes through (a subset of PGlite's own). */
export interface PgliteSettings {
  /** Server settings, e.g. `['shared_buffers=16MB']`. */
  readonly postgresqlconf?: string[];
  /** Do not wait for the file system after each commit. */
  readonly relaxedDurability?: boolean;
}
