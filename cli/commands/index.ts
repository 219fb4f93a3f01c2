import type { Command } from '../Command.ts';
import { diagramCommand } from './diagram.ts';

/** Every sub-command, in the order `opstate --help` lists them. One file per command. */
export const commands: readonly Command[] = [diagramCommand];
