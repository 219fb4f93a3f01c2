import { toMermaid } from '../../machines/diagram.ts';
import { operationMachine } from '../../machines/operationMachine.ts';
import { physicalCopyMachine } from '../../machines/physicalCopyMachine.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';

const MACHINES = { operation: operationMachine, 'physical-copy': physicalCopyMachine } as const;

export const diagramCommand: Command = {
  name: 'diagram',
  summary: 'Print a lifecycle as a Mermaid stateDiagram-v2, generated from the machine definition',
  usage: 'opstate diagram [--machine operation|physical-copy]',
  async run(args, io) {
    const { values, positionals } = parseFlags(args, { machine: { type: 'string' } });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    const name = values.machine ?? 'operation';
    if (!(name in MACHINES)) {
      throw new UsageError(
        `unknown machine '${name}'; use one of ${Object.keys(MACHINES).join(', ')}`,
      );
    }
    io.out(toMermaid(MACHINES[name as keyof typeof MACHINES]));
    return 0;
  },
};
