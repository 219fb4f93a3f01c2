/**
 * The runtime as the `opstate` entry publishes it: what a stage service and an operator tool use,
 * declared with no database type in it. `Runtime.ts` extends it with the database, the store and
 * the repositories the repository's own code reaches (`internalsOf` in `opstate/internal`).
 */
import type { ArtifactType } from '../machines/ArtifactType.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationEvent } from '../machines/operationMachine.ts';
import type { Logger } from '../observe/Logger.ts';
import type {
  AppliedTransition,
  CreateOperationInput,
  DatabaseHandle,
  DataLocation,
  FlowLimit,
  FlowLimitInput,
  FlowLimitScope,
  MigrateResult,
  NewDataTransferPackage,
  NewRawDataFile,
  NewRawDataPackage,
  OperationInspection,
  OutputCopy,
  PhysicalCopyRecord,
  PipelineRollback,
  ReleasedClaim,
  RollbackRequest,
  StagedOnRequest,
  StageRequest,
} from '../persistence/publicRecords.ts';
import type { Transport } from '../transport/Transport.ts';
import type { RunningWorker, WorkerServeOptions } from '../worker/WorkerServing.ts';
import type { RuntimeTiming } from './RuntimeTiming.ts';

export type { DatabaseHandle } from '../persistence/publicRecords.ts';

/** Registers locations, raw data files, packages and their copies (`runtime.artifacts`). */
export interface Artifacts {
  /** Registers a location; `CONFLICT` when its site and name are taken. */
  addLocation(input: Omit<DataLocation, 'id'>): Promise<DataLocation>;
  /** The location registered under its site and name, registered now when there is none. */
  findOrAddLocation(input: Omit<DataLocation, 'id'>): Promise<DataLocation>;
  findLocation(site: string, name: string): Promise<DataLocation | undefined>;
  locationsById(ids: readonly string[]): Promise<DataLocation[]>;
  addDataTransferPackage(input: NewDataTransferPackage): Promise<string>;
  findOrAddDataTransferPackage(input: NewDataTransferPackage): Promise<string>;
  addRawDataPackage(input: NewRawDataPackage): Promise<string>;
  findOrAddRawDataPackage(input: NewRawDataPackage): Promise<string>;
  addRawDataFile(input: NewRawDataFile): Promise<string>;
  findOrAddRawDataFile(input: NewRawDataFile): Promise<string>;
  assignFiles(rawDataPackageId: string, fileIds: readonly string[]): Promise<void>;
  assignPackages(dataTransferPackageId: string, packageIds: readonly string[]): Promise<void>;
  /**
   * Declares a raw data package's files all registered, each PRESENT at `locationId`: a declared
   * pipeline's packaging there is then created by the control plane, once.
   */
  declareFilesComplete(input: {
    readonly rawDataPackageId: string;
    readonly locationId: string;
    readonly by?: string;
  }): Promise<{ readonly declared: boolean; readonly files: number }>;
  addCopy(input: OutputCopy): Promise<{ copy: PhysicalCopyRecord; created: boolean }>;
  findOrAddCopy(input: OutputCopy): Promise<{ copy: PhysicalCopyRecord; created: boolean }>;
  findLiveCopy(
    artifactType: ArtifactType,
    artifactId: string,
    locationId: string,
  ): Promise<PhysicalCopyRecord | undefined>;
  copiesOf(artifactType: ArtifactType, artifactId: string): Promise<PhysicalCopyRecord[]>;
}

/** Flow limits per location, of one kind or of every kind (`runtime.limits`). */
export interface FlowLimits {
  set(input: FlowLimitInput): Promise<FlowLimit>;
  list(): Promise<FlowLimit[]>;
  clear(scope: FlowLimitScope): Promise<FlowLimit | null>;
}

export interface ControlPlane {
  readonly isLeader: boolean;
  /** This replica's name in the leadership lease (`opstate status` shows the leader's). */
  readonly holder: string;
  stop(): Promise<void>;
}

/** What `runtime.startWorker` takes: the kinds it serves, their handlers, where it reads. */
export type StartWorkerOptions<K extends OperationKind> = WorkerServeOptions<K>;

/** A running worker. */
export type Worker = RunningWorker;

/** What `runtime.startCopyDeleter` takes. */
export interface StartCopyDeleterOptions {
  /** Names this deleter in leases, outcomes and history rows (default `deleter-<random>`). */
  readonly id?: string;
  /** Wait between passes when idle (default 5 s). */
  readonly intervalMs?: number;
  /** How long a deletion stays with this deleter without a renewal (default 60 s). */
  readonly leaseMs?: number;
  /** Copies scheduled, planned or taken over per pass (default 16). */
  readonly batchSize?: number;
  /**
   * How long a member some process holds open is rechecked before it is kept and the deletion
   * fails for an operator (default 5 s).
   */
  readonly openWaitMs?: number;
}

/** A running copy deleter. */
export interface CopyDeleter {
  readonly id: string;
  /** Run a pass now. */
  wake(): void;
  /** Stops after the current member; the lease of an unfinished deletion runs out for another. */
  stop(): Promise<void>;
}

/** The embedded runtime of one deployment: the servers it opened and the actors on them. */
export interface Runtime {
  /** The database connection, to hand to `startDashboard`. */
  readonly database: DatabaseHandle;
  /** Register locations, raw data files, packages and their copies. */
  readonly artifacts: Artifacts;
  /**
   * Flow limits: how many operations may run at once on a location, of one kind or of every
   * kind (`set`, `list`, `clear`); every control plane's scheduler enforces them in its claim.
   */
  readonly limits: FlowLimits;
  readonly transport: Transport;
  readonly timing: RuntimeTiming;
  readonly logger: Logger;
  /** Who `submit` records as the submitter when a call gives no `by`. */
  readonly serviceName: string;
  /** What it runs on: a Postgres server or PGlite, and JetStream or the in-process transport. */
  readonly mode: {
    readonly database: 'postgres' | 'pglite';
    readonly transport: 'jetstream' | 'in-process';
  };
  /** Applies the committed migrations; harmless to repeat. */
  migrate(): Promise<MigrateResult>;
  /**
   * Creates an operation (PENDING) and returns its id; a local control plane schedules it at once.
   * The creation is recorded as by `input.by`, else by the runtime's `serviceName`.
   */
  submit(input: CreateOperationInput): Promise<string>;
  /** Creates many operations in one statement (all or none) and returns their ids in order. */
  submitMany(inputs: readonly CreateOperationInput[]): Promise<string[]>;
  /** The operation with its subtype fields, copies, transitions and journal. */
  get(id: string): Promise<OperationInspection>;
  /**
   * An operator command (`RETRY`, `RESET`, `CANCEL`); refused with the machine's reason. The
   * history records it as by `options.by` (default `operator`; a named operator is
   * `operator:<name> (<where>)`).
   */
  command(
    id: string,
    event: OperationEvent,
    options?: { readonly by?: string },
  ): Promise<AppliedTransition>;
  /**
   * Stages a raw data package on request: in one transaction, an active operation group holding a
   * retention claim on the verified archive copy it stages from, and its STAGING operation
   * (PENDING) into the processing location `to` (id or `site/name`). While the group is active the
   * deletion path keeps that copy, and the copy the staging produces. Recorded as by `request.by`,
   * else the runtime's `serviceName`. An unknown package or location is `NOT_FOUND`; a location
   * that is not a processing location, or a package with no verified archive copy, `BAD_INPUT`.
   */
  stage(request: StageRequest): Promise<StagedOnRequest>;
  /**
   * Releases a staging's retention claim (its group is no longer active), recorded as by
   * `options.by`, else the runtime's `serviceName`. An unknown group is `NOT_FOUND`; a group that
   * holds no claim (already released) is `BAD_INPUT`; either changes nothing.
   */
  release(groupId: string, options?: { readonly by?: string }): Promise<ReleasedClaim>;
  /**
   * Rolls a raw data package or data transfer package back to a stage of the runtime's pipeline
   * (`createRuntime({ pipeline })`): in one transaction, a rollback row (who, when, the plan), the
   * operations of that stage and every later stage in the artifact's lineage marked superseded,
   * and the stage's operations created again (PENDING), each carrying the rollback's id; the
   * pipeline's pass creates every later stage again, once, from the re-run. Deletes nothing.
   * `dryRun` returns the plan and writes nothing. Recorded as by `request.by`, else the runtime's
   * `serviceName`. Refused with nothing written: `BAD_INPUT` (unknown stage, no uuid, a stage the
   * artifact never reached), `NOT_FOUND` (no such package), `CONFLICT` (an operation to redo is
   * live), `UNSAFE` (the re-run would read a copy that is gone; the message names it), `CONFIG`
   * (no pipeline).
   */
  rollback(request: RollbackRequest): Promise<PipelineRollback>;
  /** Contends for leadership and runs the control-plane loops while leader. */
  startControlPlane(): ControlPlane;
  startWorker<K extends OperationKind>(options: StartWorkerOptions<K>): Worker;
  /** Starts a deleter: deletes copies the deletion policy cleans once their archive is verified. */
  startCopyDeleter(options?: StartCopyDeleterOptions): CopyDeleter;
  /** Stops workers, deleters and the control plane, then closes the transport and the database. */
  close(): Promise<void>;
}
