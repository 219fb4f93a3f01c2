import type { Command } from '../Command.ts';
import { archiveCommand } from './archive.ts';
import { artifactCommand } from './artifact.ts';
import { breakerCommand } from './breaker.ts';
import { configCommand } from './config.ts';
import { controlPlaneCommand } from './controlPlane.ts';
import { copyCommand } from './copy.ts';
import { dashboardCommand } from './dashboard.ts';
import { demoCommand } from './demo.ts';
import { diagramCommand } from './diagram.ts';
import { inspectCommand } from './inspect.ts';
import { listCommand } from './list.ts';
import { locationCommand } from './location.ts';
import { migrateCommand } from './migrate.ts';
import { cancelCommand, resetCommand, retryCommand } from './operatorCommands.ts';
import { policyCommand } from './policy.ts';
import { recountCommand } from './recount.ts';
import { statusCommand } from './status.ts';
import { submitCommand } from './submit.ts';
import { waitCommand } from './wait.ts';
import { workerCommand } from './worker.ts';

/** Every sub-command, in the order `opstate --help` lists them. */
export const commands: readonly Command[] = [
  locationCommand,
  artifactCommand,
  copyCommand,
  submitCommand,
  listCommand,
  waitCommand,
  statusCommand,
  recountCommand,
  inspectCommand,
  retryCommand,
  resetCommand,
  cancelCommand,
  breakerCommand,
  archiveCommand,
  policyCommand,
  migrateCommand,
  controlPlaneCommand,
  workerCommand,
  dashboardCommand,
  configCommand,
  diagramCommand,
  demoCommand,
];
