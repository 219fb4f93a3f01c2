import type { Command } from '../Command.ts';

export const diagramCommand: Command = {
  name: 'diagram',
  summary: 'Print the operation lifecycle as a Mermaid stateDiagram-v2, generated from the machine',
  usage: 'opstate diagram',
  async run(_args, io) {
    io.err('not yet');
    return 1;
  },
};
