import type { Command } from '../Command.ts';
import { breakerCommand } from './breaker.ts';
import { configCommand } from './config.ts';
import { controlPlaneCommand } from './controlPlane.ts';
import { demoCommand } from './demo.ts';
import { diagramCommand } from './diagram.ts';
import { inspectCommand } from './inspect.ts';
import { migrateCommand } from './migrate.ts';
import { cancelCommand, resetCommand, retryCommand } from './operatorCommands.ts';
import { statusCommand } from './status.ts';
import { workerCommand } from './worker.ts';

/** Every sub-command, in the order `opstate --help` lists them. One file per command. */
export const commands: readonly Command[] = [
  diagramCommand,
  migrateCommand,
  statusCommand,
  inspectCommand,
  controlPlaneCommand,
  workerCommand,
  retryCommand,
  resetCommand,
  cancelCommand,
  breakerCommand,
  configCommand,
  demoCommand,
];
