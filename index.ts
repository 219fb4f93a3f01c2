// The public entry of opstate. Names are re-exported one by one; anything not listed here is
// internal and may change without notice.

export type { Decision, OperationEffect, PersistedOperationSnapshot } from './machines/decide.ts';
export {
  acceptedEvents,
  createOperationState,
  decide,
  parseOperationEvent,
} from './machines/decide.ts';
export { toMermaid } from './machines/diagram.ts';
export type { GroupStatus } from './machines/groupStatus.ts';
export { deriveGroupStatus } from './machines/groupStatus.ts';
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
export type { PackageOperation } from './machines/packageState.ts';
export { derivePackageState, PackageState } from './machines/packageState.ts';
export type { PhysicalCopyEvent } from './machines/physicalCopyMachine.ts';
export {
  PHYSICAL_COPY_STATUSES,
  PhysicalCopyStatus,
  physicalCopyMachine,
} from './machines/physicalCopyMachine.ts';
export type { Route } from './machines/routing.ts';
export {
  allRoutes,
  DEFAULT_LOCATION_TYPE,
  DEFAULT_OPERATION_TYPE,
  defaultRoute,
  LocationType,
  OperationType,
  QUEUE_OPERATIONS_BY_LOCATION_TYPE,
  queueName,
  queueSubject,
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
