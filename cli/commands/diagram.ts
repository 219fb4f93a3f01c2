import { Option } from 'commander';
import { toMermaid } from '../../machines/diagram.ts';
import { operationMachine } from '../../machines/operationMachine.ts';
import { physicalCopyMachine } from '../../machines/physicalCopyMachine.ts';
import { defineCommand, optionsOf } from '../Command.ts';

const MACHINES = { operation: operationMachine, 'physical-copy': physicalCopyMachine } as const;
const SUMMARY =
  'Print a lifecycle as a Mermaid stateDiagram-v2, generated from the machine definition';

/** `opstate diagram [--machine operation|physical-copy] [--json]`. */
export const diagramCommand = defineCommand('diagram', SUMMARY, (program, ctx) => {
  program
    .command('diagram')
    .description(SUMMARY)
    .addOption(
      new Option('--machine <name>', 'which lifecycle')
        .choices(Object.keys(MACHINES))
        .default('operation'),
    )
    .option('--json', 'print {"machine", "mermaid"}')
    .action(
      ctx.action(async (cmd) => {
        const { machine, json } = optionsOf<{ machine: keyof typeof MACHINES; json?: boolean }>(
          cmd,
        );
        const mermaid = toMermaid(MACHINES[machine]);
        ctx.io.out(json === true ? JSON.stringify({ machine, mermaid }) : mermaid);
        return 0;
      }),
    );
});
