// The internal entry of opstate (`opstate/internal`): the repositories, the pure decisions, the
// statements' readers and the actors' parts that the public entry leaves out. No stability
// promise: any name here may change or go in any release. The repository's own code imports the
// source files directly; this entry is for tools that accept that. `internalsOf` reaches the
// database, the store and the repositories behind a public `Runtime`.

import { OpstateError, OpstateErrorCode } from './machines/OpstateError.ts';
import type { Runtime as PublicRuntime } from './runtime/PublicRuntime.ts';
import type { Runtime as RuntimeInternals } from './runtime/Runtime.ts';

export { createRuntime as createRuntimeInternals } from './runtime/Runtime.ts';
export type { RuntimeInternals };

/**
 * The runtime `createRuntime` opened, with its internals: the database, the store and the
 * repositories. `BAD_INPUT` for an object that is no runtime of this package.
 */
export function internalsOf(runtime: PublicRuntime): RuntimeInternals {
  const internals = runtime as RuntimeInternals;
  if (typeof internals.store?.create !== 'function' || internals.journal === undefined) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'internalsOf takes a runtime that createRuntime opened',
    );
  }
  return internals;
}

export type { CopyDeleterOptions } from './deleter/CopyDeleter.ts';
export {
  ARCHIVE_STATES,
  ArchiveState,
  MEMBER_OUTCOMES,
  MemberOutcome,
} from './machines/ArchiveState.ts';
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
export type { TimerHandle } from './machines/Clock.ts';
export type { Deadlines } from './machines/deadlines.ts';
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
export { missingOutputs, outputContractError, requiredOutputs } from './machines/missingOutputs.ts';
export type { ResumeFacts } from './machines/nextSafeAction.ts';
export { nextSafeAction } from './machines/nextSafeAction.ts';
export type { OperationContext, OperationInput, ResetBy } from './machines/operationMachine.ts';
export {
  DEFAULT_MAX_RETRIES,
  operationMachine,
  retryBackoffMs,
} from './machines/operationMachine.ts';
export type { ContractField, KindContract, OutputRequirement } from './machines/outputContract.ts';
export { membersFieldOf, OUTPUT_CONTRACT } from './machines/outputContract.ts';
export { outputContractTable } from './machines/outputContractTable.ts';
export type { PackageOperation } from './machines/packageState.ts';
export { derivePackageState, PackageState } from './machines/packageState.ts';
export type { PhysicalCopyEvent, PhysicalCopyGuardFacts } from './machines/physicalCopyMachine.ts';
export {
  DEFAULT_MAX_DELETION_FAILURES,
  physicalCopyMachine,
} from './machines/physicalCopyMachine.ts';
export type {
  DefaultPipelineLocations,
  PipelineLocation,
  PipelineSpec,
  PipelineStage,
} from './machines/pipeline.ts';
export { DEFAULT_STARVATION_AGE_MS } from './machines/priority.ts';
export type { QueueReaders, ReadingBeat } from './machines/queueReaders.ts';
export { queueReaders, readersOf } from './machines/queueReaders.ts';
export type { RecoveryPath } from './machines/recoveryPaths.ts';
export type { ReplayStep, StoredTransition } from './machines/replayTransitions.ts';
export { replayTransitions } from './machines/replayTransitions.ts';
export type { RoutedLocation, SiteRoute } from './machines/routing.ts';
export {
  allRoutes,
  DEFAULT_DISCOVERY_INTERVAL_MS,
  DEFAULT_LOCATION_TYPE,
  DEFAULT_OPERATION_TYPE,
  defaultRoute,
  isSiteRoute,
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
export type { LogLevel } from './observe/Logger.ts';
export type { ObservedTransition, RuntimeObserver } from './observe/RuntimeObserver.ts';
export { composeObservers, RECOVERY_PATHS } from './observe/RuntimeObserver.ts';
export type { ArchiveFields, ArchiveRecordEntry } from './persistence/ArchiveRecordRepository.ts';
export { ArchiveRecordRepository } from './persistence/ArchiveRecordRepository.ts';
export type {
  NewCopy,
  NewDataTransferPackage,
  NewRawDataFile,
  NewRawDataPackage,
} from './persistence/ArtifactRepository.ts';
export { ArtifactRepository } from './persistence/ArtifactRepository.ts';
export type { CircuitBreakerView } from './persistence/CircuitBreakerRepository.ts';
export { CircuitBreakerRepository, CircuitState } from './persistence/CircuitBreakerRepository.ts';
export type {
  AppliedCopyTransition,
  CopyTransitionEntry,
  CopyTransitionOptions,
} from './persistence/CopyLifecycle.ts';
export { CopyLifecycle } from './persistence/CopyLifecycle.ts';
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
export type { FlowLimitInput, FlowLimitScope } from './persistence/FlowLimitRepository.ts';
export { FlowLimitRepository, MAX_FLOW_LIMIT } from './persistence/FlowLimitRepository.ts';
export { GroupRepository } from './persistence/GroupRepository.ts';
export type {
  HistoryMaintenance,
  HistoryPartition,
  PruneResult,
  PruneStep,
  RetentionPolicy,
} from './persistence/HistoryRetention.ts';
export {
  HistoryRetentionRepository,
  MAX_JOURNAL_DAYS,
  MIN_KEEP_MS,
  MIN_PARTITION_IDS,
} from './persistence/HistoryRetention.ts';
export { inspectOperation } from './persistence/inspectOperation.ts';
export { JournalRepository } from './persistence/JournalRepository.ts';
export type {
  JournalMaintenance,
  JournalPruneStep,
  JournalSpan,
} from './persistence/JournalRetention.ts';
export { JournalRetentionRepository } from './persistence/JournalRetention.ts';
export { LineageRepository } from './persistence/LineageRepository.ts';
export type { AttentionList, AttentionSection } from './persistence/loadAttention.ts';
export { loadAttention } from './persistence/loadAttention.ts';
export { migrate } from './persistence/migrate.ts';
export type { OperationRecord } from './persistence/OperationRecord.ts';
export { OperationStore } from './persistence/OperationStore.ts';
export type {
  Database,
  EmbeddedEngine,
  OpenDatabaseOptions,
  PgliteSettings,
} from './persistence/openDatabase.ts';
export { openDatabase } from './persistence/openDatabase.ts';
export type { CreateOperationOptions, TransitionEntry } from './persistence/publicRecords.ts';
export type { ResumeRecord } from './persistence/resumeRecord.ts';
export { loadResumeRecord } from './persistence/resumeRecord.ts';
export { timeOrderedId } from './persistence/timeOrderedId.ts';
export type { UnreadableValue } from './persistence/UnreadableValue.ts';
export type {
  Configuration,
  ConfigurationFlags,
  ConfigurationOverrides,
  LogLevelName,
} from './runtime/Configuration.ts';
export {
  databaseOptionsOf,
  LOG_LEVELS,
  loadConfiguration,
  redactConfiguration,
  secretsOf,
} from './runtime/Configuration.ts';
export type { InspectionStreamOptions, StatelyInspector } from './runtime/InspectionStream.ts';
export {
  replayOperation,
  sendOperationSteps,
  startInspectionStream,
} from './runtime/InspectionStream.ts';
export type { Metrics, MetricsOptions } from './runtime/Metrics.ts';
export { createMetrics } from './runtime/Metrics.ts';
export type { MetricsServer, MetricsServerOptions, Readiness } from './runtime/metricsServer.ts';
export { readinessOf, startMetricsServer } from './runtime/metricsServer.ts';
export { resolveRuntimeTiming } from './runtime/Runtime.ts';
export type { StartupWait } from './runtime/RuntimeOptions.ts';
export type { DeadlineOverrides, RuntimeTimers } from './runtime/RuntimeTiming.ts';
export { createInProcessTransport } from './transport/inprocess/createInProcessTransport.ts';
export { createJetStreamTransport } from './transport/jetstream/createJetStreamTransport.ts';
export type { NatsAuth, NatsCredentials, TlsFiles } from './transport/jetstream/natsCredentials.ts';
export type {
  Delivery,
  DispatchMessage,
  TransportEvent,
  TransportTiming,
  WaitingDispatch,
  WaitingDispatches,
  WorkerHeartbeat,
  WorkerReads,
} from './transport/Transport.ts';
export { WAITING_MAX_READS } from './transport/Transport.ts';
export { resolveTiming } from './transport/TransportTiming.ts';
export { isRetryable } from './worker/Worker.ts';
