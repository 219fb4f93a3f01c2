/** The whole drizzle schema; `drizzle.config.ts` and the connection factory read it from here. */
export {
  archiveRecord,
  copyDeletion,
  copyDeletionMember,
  copyDeletionOutcome,
  copyDeletionReceipt,
  deletionCandidate,
  deletionPolicy,
} from './archive.ts';
export { dataLocation, dataTransferPackage, rawDataFile, rawDataPackage } from './artifacts.ts';
export { circuitBreaker } from './circuitBreaker.ts';
export { controlPlaneLease } from './controlPlaneLease.ts';
export { flowLimit } from './flowLimit.ts';
export {
  dispatchRelayCursor,
  historyRetention,
  operationFailureEvent,
  operationReplan,
  operationStep,
  operationTransition,
} from './journal.ts';
export {
  operation,
  operationGroup,
  operationInput,
  operationOutput,
  operationTally,
} from './operation.ts';
export {
  bundlingOperation,
  longTermArchiveOperation,
  packagingOperation,
  SUBTYPE_TABLE,
  stagingOperation,
  transferOperation,
  unpackOperation,
} from './operationSubtypes.ts';
export { packageFilesComplete } from './packageFacts.ts';
export {
  dataTransferPackagePhysicalCopy,
  physicalCopy,
  physicalCopyTransition,
  rawDataFilePhysicalCopy,
  rawDataPackagePhysicalCopy,
} from './physicalCopy.ts';
export { pipelineCursor, pipelineRollback } from './pipeline.ts';
