// The public entry of opstate. Names are re-exported one by one; anything not listed here is
// internal and may change without notice. What only tests and crash drills need is in testing.ts
// (`opstate/testing`).

export type { Dashboard, DashboardOptions } from './dashboard/startDashboard.ts';
export { startDashboard } from './dashboard/startDashboard.ts';
export type { CopyDeleter, CopyDeleterOptions } from './deleter/CopyDeleter.ts';
export {
  ARCHIVE_STATES,
  ArchiveState,
  MEMBER_OUTCOMES,
  MemberOutcome,
} from './machines/ArchiveState.ts';
export {
  ARTIFACT_TYPES,
  ArtifactType,
  isArtifactType,
} from './machines/ArtifactType.ts';
// Who submits: a service or a person by name, never one of opstate's own actors.
export { SYSTEM_ACTORS, type SystemActor } from './machines/actors.ts';
export type {
  AttentionFacts,
  AttentionItem,
  AttentionOperationRow,
  AttentionQueueRow,
  AttentionTiming,
} from './machines/attention.ts';
export {
  ATTENTION_CATEGORIES,
  AttentionCategory,
  classifyBreaker,
  classifyCopy,
  classifyOperation,
  classifyQueue,
} from './machines/attention.ts';
export type { Clock, TimerHandle } from './machines/Clock.ts';
export { systemClock } from './machines/Clock.ts';
export type { Deadlines } from './machines/deadlines.ts';
export { DEFAULT_DEADLINES_MS, MAX_DEADLINE_MS } from './machines/deadlines.ts';
export type { Decision, OperationEffect, PersistedOperationSnapshot } from './machines/decide.ts';
export {
  acceptedEvents,
  createOperationState,
  decide,
  parseOperationEvent,
} from './machines/decide.ts';
export type { CopyCommand, CopyDecision, CopyFacts, CopyState } from './machines/decideCopy.ts';
export { acceptedCopyEvents, decideCopy } from './machines/decideCopy.ts';
export { toMermaid } from './machines/diagram.ts';
export type { GroupStatus } from './machines/groupStatus.ts';
export { deriveGroupStatus } from './machines/groupStatus.ts';
export type {
  ContractFacts,
  MissingOutput,
  ProducedCopy,
  RequiredOutput,
} from './machines/missingOutputs.ts';
// What each kind must produce, checked at every completion.
export {
  missingOutputs,
  outputContractError,
  requiredOutputs,
} from './machines/missingOutputs.ts';
export type { ResumeFacts } from './machines/nextSafeAction.ts';
export { nextSafeAction } from './machines/nextSafeAction.ts';
export { isOperationKind, OPERATION_KINDS, OperationKind } from './machines/OperationKind.ts';
export { OpstateError, OpstateErrorCode } from './machines/OpstateError.ts';
export type {
  OperationContext,
  OperationError,
  OperationEvent,
  OperationInput,
  ResetBy,
} from './machines/operationMachine.ts';
export {
  DEFAULT_MAX_RETRIES,
  OPERATION_STATUSES,
  OperationStatus,
  operationMachine,
  retryBackoffMs,
} from './machines/operationMachine.ts';
export type { OperatorAction } from './machines/operatorEvent.ts';
export { OPERATOR_ACTIONS, operatorEvent } from './machines/operatorEvent.ts';
export type {
  ContractField,
  KindContract,
  OutputRequirement,
} from './machines/outputContract.ts';
export { membersFieldOf, OUTPUT_CONTRACT } from './machines/outputContract.ts';
export { outputContractTable } from './machines/outputContractTable.ts';
export type { PackageOperation } from './machines/packageState.ts';
export { derivePackageState, PackageState } from './machines/packageState.ts';
export type {
  PhysicalCopyEvent,
  PhysicalCopyGuardFacts,
} from './machines/physicalCopyMachine.ts';
export {
  DEFAULT_MAX_DELETION_FAILURES,
  PHYSICAL_COPY_STATUSES,
  PhysicalCopyStatus,
  physicalCopyMachine,
} from './machines/physicalCopyMachine.ts';
export {
  defaultPipeline,
  definePipeline,
  type Pipeline,
  type PipelineLocation,
  type PipelineSpec,
  type PipelineStage,
} from './machines/pipeline.ts';
export {
  DEFAULT_PRIORITY,
  DEFAULT_STARVATION_AGE_MS,
  MAX_PRIORITY,
  MIN_PRIORITY,
} from './machines/priority.ts';
export type { QueueReaders, ReadingBeat } from './machines/queueReaders.ts';
export { queueReaders, readersOf } from './machines/queueReaders.ts';
export type { RecoveryPath } from './machines/recoveryPaths.ts';
export type { ReplayStep, StoredTransition } from './machines/replayTransitions.ts';
export { replayTransitions } from './machines/replayTransitions.ts';
export type { Route, RoutedLocation, SiteRoute } from './machines/routing.ts';
export {
  allRoutes,
  DEFAULT_DISCOVERY_INTERVAL_MS,
  DEFAULT_LOCATION_TYPE,
  DEFAULT_OPERATION_TYPE,
  defaultRoute,
  isSiteRoute,
  LocationType,
  OperationType,
  QUEUE_OPERATIONS_BY_LOCATION_TYPE,
  queueName,
  queueSubject,
  ROUTED_LOCATION_FIELD,
  routeNameProblem,
  routeOfQueue,
  routesAt,
  siteRoute,
} from './machines/routing.ts';
export type { EnvelopedSnapshot, SnapshotEnvelope } from './machines/snapshotEnvelope.ts';
export {
  currentEnvelope,
  envelop,
  OPERATION_MACHINE_ID,
  OPERATION_MACHINE_VERSION,
  upgradeSnapshot,
  XSTATE_VERSION,
} from './machines/snapshotEnvelope.ts';
export { submitterProblem } from './machines/submitter.ts';
export type { Logger, LogLevel } from './observe/Logger.ts';
export { consoleLogger } from './observe/Logger.ts';
export type { PinoLoggerOptions } from './observe/pinoLogger.ts';
export { createPinoLogger } from './observe/pinoLogger.ts';
export type { ObservedTransition, RuntimeObserver } from './observe/RuntimeObserver.ts';
export { composeObservers, RECOVERY_PATHS } from './observe/RuntimeObserver.ts';
export type { ArchiveFields, ArchiveRecordEntry } from './persistence/ArchiveRecordRepository.ts';
// Archive then delete: the archive record, every copy status change, the policy, the deletions.
export { ArchiveRecordRepository } from './persistence/ArchiveRecordRepository.ts';
// Persistence: the store and repositories a stage service registers its artifacts through.
export type {
  DataLocation,
  NewCopy,
  NewDataTransferPackage,
  NewRawDataFile,
  NewRawDataPackage,
  PhysicalCopyRecord,
} from './persistence/ArtifactRepository.ts';
export { ArtifactRepository } from './persistence/ArtifactRepository.ts';
export type { CircuitBreakerView } from './persistence/CircuitBreakerRepository.ts';
// Circuit breakers per (kind, location): read and reset them from a stage service or a tool.
export { CircuitBreakerRepository, CircuitState } from './persistence/CircuitBreakerRepository.ts';
export type {
  AppliedCopyTransition,
  CopyTransitionEntry,
  CopyTransitionOptions,
} from './persistence/CopyLifecycle.ts';
export { CopyLifecycle } from './persistence/CopyLifecycle.ts';
// What submit takes: a request tagged by kind, its fields typed from the kind's subtype table.
export type {
  CreateOperationInput,
  CreateOperationOptions,
} from './persistence/CreateOperationInput.ts';
export type { DeletionPolicy } from './persistence/DeletionPolicyRepository.ts';
export {
  DEFAULT_DELETION_POLICY,
  DeletionPolicyRepository,
} from './persistence/DeletionPolicyRepository.ts';
export type {
  DeletionMemberRecord,
  DeletionPlanRecord,
  DeletionReceipt,
} from './persistence/DeletionRepository.ts';
export { DeletionRepository } from './persistence/DeletionRepository.ts';
export type { DatabaseTls } from './persistence/databaseTls.ts';
export type { EmbeddedPostgres, EmbeddedPostgresOptions } from './persistence/embeddedPostgres.ts';
export { startEmbeddedPostgres } from './persistence/embeddedPostgres.ts';
export type {
  FlowLimit,
  FlowLimitInput,
  FlowLimitScope,
} from './persistence/FlowLimitRepository.ts';
export { FlowLimitRepository, MAX_FLOW_LIMIT } from './persistence/FlowLimitRepository.ts';
export { GroupRepository } from './persistence/GroupRepository.ts';
export type { InputRelations } from './persistence/inputRelations.ts';
export type { OperationInspection } from './persistence/inspectOperation.ts';
export { inspectOperation } from './persistence/inspectOperation.ts';
export { JournalRepository } from './persistence/JournalRepository.ts';
export { LineageRepository } from './persistence/LineageRepository.ts';
export type { AttentionList, AttentionSection } from './persistence/loadAttention.ts';
export { loadAttention } from './persistence/loadAttention.ts';
export { migrate } from './persistence/migrate.ts';
export type { OperationRecord } from './persistence/OperationRecord.ts';
export { OperationStore } from './persistence/OperationStore.ts';
export type { OutputCopy } from './persistence/OutputCopy.ts';
export type {
  Database,
  EmbeddedEngine,
  OpenDatabaseOptions,
  PgliteSettings,
} from './persistence/openDatabase.ts';
export { openDatabase } from './persistence/openDatabase.ts';
export type { ResumeRecord } from './persistence/resumeRecord.ts';
export { loadResumeRecord } from './persistence/resumeRecord.ts';
export type { OperationFields } from './persistence/subtypeFields.ts';
export { timeOrderedId } from './persistence/timeOrderedId.ts';
export type { UnreadableValue } from './persistence/UnreadableValue.ts';
export type {
  Configuration,
  ConfigurationFlags,
  ConfigurationOverrides,
  LogLevelName,
} from './runtime/Configuration.ts';
// Configuration: the environment and flags an opstate process reads, validated and redacted.
export {
  databaseOptionsOf,
  LOG_LEVELS,
  loadConfiguration,
  redactConfiguration,
  secretsOf,
} from './runtime/Configuration.ts';
// The operator's face: Stately inspection from persisted transitions, the dashboard, attention.
export type { InspectionStreamOptions, StatelyInspector } from './runtime/InspectionStream.ts';
export {
  replayOperation,
  sendOperationSteps,
  startInspectionStream,
} from './runtime/InspectionStream.ts';
export type { Metrics, MetricsOptions } from './runtime/Metrics.ts';
// Operating it: Prometheus metrics, health and readiness endpoints, JSON logs.
export { createMetrics } from './runtime/Metrics.ts';
export type { MetricsServer, MetricsServerOptions, Readiness } from './runtime/metricsServer.ts';
export { readinessOf, startMetricsServer } from './runtime/metricsServer.ts';
export type {
  ControlPlane,
  Runtime,
  RuntimeOptions,
  RuntimeTiming,
  StartWorkerOptions,
} from './runtime/Runtime.ts';
// Runtime: embed opstate in a stage service.
export { createRuntime, resolveRuntimeTiming } from './runtime/Runtime.ts';
export type { StartupWait } from './runtime/RuntimeOptions.ts';
export type { DeadlineOverrides, RuntimeTimers } from './runtime/RuntimeTiming.ts';
// Transport: the dispatch/heartbeat contract and its two implementations.
export { createInProcessTransport } from './transport/inprocess/createInProcessTransport.ts';
export { createJetStreamTransport } from './transport/jetstream/createJetStreamTransport.ts';
export type { NatsAuth, NatsCredentials, TlsFiles } from './transport/jetstream/natsCredentials.ts';
export type {
  Delivery,
  DispatchMessage,
  Heartbeats,
  Transport,
  TransportEvent,
  TransportTiming,
  WorkerHeartbeat,
  WorkerReads,
} from './transport/Transport.ts';
export { resolveTiming } from './transport/TransportTiming.ts';
export type {
  HandlerContext,
  HandlerResult,
  OperationHandler,
  OperationView,
} from './worker/OperationHandler.ts';
export type { Worker } from './worker/Worker.ts';
export { isRetryable } from './worker/Worker.ts';
