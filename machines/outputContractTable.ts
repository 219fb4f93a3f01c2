import { OPERATION_KINDS } from './OperationKind.ts';
import { OUTPUT_CONTRACT, type OutputRequirement } from './outputContract.ts';
import {
  DEFAULT_OPERATION_TYPE,
  QUEUE_OPERATIONS_BY_LOCATION_TYPE,
  ROUTED_LOCATION_FIELD,
} from './routing.ts';

/** Where a kind is queued: the location it routes on, and the queue name that location gives. */
function routesOn(kind: (typeof OPERATION_KINDS)[number]): string {
  const type = DEFAULT_OPERATION_TYPE[kind];
  const at = Object.entries(QUEUE_OPERATIONS_BY_LOCATION_TYPE)
    .filter(([, types]) => types.includes(type))
    .map(([t]) => t);
  const locationType = at.length === 1 ? at[0] : '<location type>';
  return `\`${ROUTED_LOCATION_FIELD[kind]}\`, a ${at.map((t) => `\`${t}\``).join(' or ')} location: \`<site>_<location>_${locationType}_${type}\``;
}

function produces(r: OutputRequirement): string {
  if (r.produce === 'named') {
    return `a copy of the \`${r.artifactType}\` named by \`${r.artifactField}\`, at \`${r.locationField}\``;
  }
  if (r.produce === 'verifiedArchive') {
    return `a VERIFIED archive record of it (the operation's archive record ends with VERIFIED, and the copy carries the verified package's checksum)`;
  }
  return `a \`${r.artifactType}\` copy of every raw data package recorded in \`${r.membersOf}\` (at least one), at \`${r.locationField}\``;
}

/**
 * The kinds table of the README, rendered from `OUTPUT_CONTRACT` and the routing tables: per kind
 * its stage, the inputs its handler reads, its fields, the location it is queued on (the one
 * whose storage its handler must reach) and what its completion must include. A test keeps the README's
 * copy equal to this, so the two cannot drift.
 *
 * @example
 * ```ts
 * console.log(outputContractTable()); // | kind | stage | inputs | fields | queued at | must produce | …
 * ```
 */
export function outputContractTable(): string {
  const rows = OPERATION_KINDS.map((kind) => {
    const c = OUTPUT_CONTRACT[kind];
    const fields = c.fields
      .map((f) => `\`${f.key}\`${f.optional ? ' (optional)' : ''}: ${f.meaning}`)
      .join('; ');
    return `| \`${kind}\` | ${c.stage} | ${c.inputs} | ${fields} | ${routesOn(kind)} | ${c.outputs.map(produces).join('; ')} |`;
  });
  return [
    '| kind | stage | inputs | fields | queued at | must produce |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
