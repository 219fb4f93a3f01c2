// The public entry of opstate (`opstate`): what a stage service and an operator tool use. Names are
// re-exported one by one, and `test/package/exports.test.ts` holds the list to
// `test/package/exports/opstate.txt`, so a change to it is a reviewed change. What only tests and
// crash drills need is in testing.ts (`opstate/testing`); everything else is in internal.ts
// (`opstate/internal`), with no stability promise. docs/public-api.md says which is which.

import type { Runtime } from './runtime/PublicRuntime.ts';
import { createRuntime as openRuntime } from './runtime/Runtime.ts';
import type { RuntimeOptions } from './runtime/RuntimeOptions.ts';

// Runtime: embed opstate in a stage service.
/**
 * Opens a runtime. Each setting comes from its option, else from the environment, resolved and
 * validated as the CLI's are: a bad value is refused at once with `CONFIG`. With no
 * `databaseUrl`/`DATABASE_URL` it runs on an embedded database; with no `natsUrl`/`NATS_URL` on the
 * in-process transport (everything in one process). With both set, workers run anywhere that
 * reaches NATS and Postgres.
 *
 * @example
 * ```ts
 * const runtime = await createRuntime();
 * runtime.startControlPlane();
 * runtime.startWorker({ kinds: [OperationKind.TRANSFER],
 *   handlers: { [OperationKind.TRANSFER]: async (ctx) => ({ outputs: [await copyOver(ctx)] }) } });
 * const id = await runtime.submit({ kind: OperationKind.TRANSFER, fields: { ... }, by: 'ingest' });
 * ```
 */
export const createRuntime: (options?: RuntimeOptions) => Promise<Runtime> = openRuntime;

// The operator's face: the dashboard embedded in a service.
export type { Dashboard, DashboardOptions } from './dashboard/publicDashboard.ts';
export { startDashboard } from './dashboard/publicDashboard.ts';
export { ARTIFACT_TYPES, ArtifactType, isArtifactType } from './machines/ArtifactType.ts';
// Time and logs: the one clock every timer reads, and the logger the runtime writes to.
export type { Clock } from './machines/Clock.ts';
export { systemClock } from './machines/Clock.ts';
export { DEFAULT_DEADLINES_MS, MAX_DEADLINE_MS } from './machines/deadlines.ts';
// The lifecycle vocabulary: kinds, statuses, the operator's events, artifacts and locations.
export { isOperationKind, OPERATION_KINDS, OperationKind } from './machines/OperationKind.ts';
// Errors: every refusal is an OpstateError with a code.
export { OpstateError, OpstateErrorCode } from './machines/OpstateError.ts';
export type { OperationError, OperationEvent } from './machines/operationMachine.ts';
export { OPERATION_STATUSES, OperationStatus } from './machines/operationMachine.ts';
export type { OperatorAction } from './machines/operatorEvent.ts';
export { OPERATOR_ACTIONS, operatorEvent } from './machines/operatorEvent.ts';
export { PHYSICAL_COPY_STATUSES, PhysicalCopyStatus } from './machines/physicalCopyMachine.ts';
// The pipeline a stage service declares: which completed stage creates which next operation.
export type { Pipeline } from './machines/pipeline.ts';
export { defaultPipeline, definePipeline } from './machines/pipeline.ts';
export { DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY } from './machines/priority.ts';
export type { Route } from './machines/routing.ts';
export { LocationType, OperationType } from './machines/routing.ts';
export type { Logger } from './observe/Logger.ts';
export { consoleLogger } from './observe/Logger.ts';
export type { PinoLoggerOptions } from './observe/pinoLogger.ts';
export { createPinoLogger } from './observe/pinoLogger.ts';
// The records submit takes and runtime.get, runtime.artifacts, runtime.limits return.
export type {
  CreateOperationInput,
  DataLocation,
  FlowLimit,
  InputRelations,
  OperationFields,
  OperationInspection,
  OutputCopy,
  PhysicalCopyRecord,
} from './persistence/publicRecords.ts';
export type {
  Artifacts,
  ControlPlane,
  CopyDeleter,
  DatabaseHandle,
  FlowLimits,
  Runtime,
  StartCopyDeleterOptions,
  StartWorkerOptions,
  Worker,
} from './runtime/PublicRuntime.ts';
export type { RuntimeOptions } from './runtime/RuntimeOptions.ts';
export type { RuntimeTiming } from './runtime/RuntimeTiming.ts';
// Long-term archives on any storage: a store only stores bytes; the archive stage runs the protocol.
export type { ArchiveStore } from './stages/ArchiveStore.ts';
export { defineArchiveStage } from './stages/defineArchiveStage.ts';
export { registerArchiveStore } from './stages/registerArchiveStore.ts';
// Transport: what runtime.transport is (its heartbeats feed the dashboard).
export type { Heartbeats, Transport } from './transport/Transport.ts';
// The handler contract: what a stage handler is given and returns.
export type {
  HandlerContext,
  HandlerResult,
  OperationHandler,
  OperationView,
} from './worker/OperationHandler.ts';
