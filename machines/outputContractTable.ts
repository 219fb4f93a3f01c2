import { OPERATION_KINDS } from './OperationKind.ts';
import { OUTPUT_CONTRACT, type OutputRequirement } from './outputContract.ts';

function produces(r: OutputRequirement): string {
  return r.produce === 'named'
    ? `a copy of the \`${r.artifactType}\` named by \`${r.artifactField}\`, at \`${r.locationField}\``
    : `a \`${r.artifactType}\` copy of every raw data package recorded in \`${r.membersOf}\` (at least one), at \`${r.locationField}\``;
}

/**
 * The kinds table of the README, rendered from `OUTPUT_CONTRACT`: per kind its stage, the inputs
 * its handler reads, its fields and what its completion must include. A test keeps the README's
 * copy equal to this, so the two cannot drift.
 *
 * @example
 * ```ts
 * console.log(outputContractTable()); // | kind | stage | inputs | fields | must produce | …
 * ```
 */
export function outputContractTable(): string {
  const rows = OPERATION_KINDS.map((kind) => {
    const c = OUTPUT_CONTRACT[kind];
    const fields = c.fields
      .map((f) => `\`${f.key}\`${f.optional ? ' (optional)' : ''}: ${f.meaning}`)
      .join('; ');
    return `| \`${kind}\` | ${c.stage} | ${c.inputs} | ${fields} | ${c.outputs.map(produces).join('; ')} |`;
  });
  return [
    '| kind | stage | inputs | fields | must produce |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
