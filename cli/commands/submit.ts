import { InvalidArgumentError } from 'commander';
import { OPERATOR } from '../../machines/actors.ts';
import {
  isOperationKind,
  OPERATION_KINDS,
  type OperationKind,
} from '../../machines/OperationKind.ts';
import { PRIORITY_ALLOWED, priorityProblem } from '../../machines/priority.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Command, defineCommand, optionsOf, UsageError, wholeNumber } from '../Command.ts';
import { parseDuration, parseNotBefore } from '../duration.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'Create an operation (PENDING); a control plane schedules it';

function kindOf(value: string): OperationKind {
  if (!isOperationKind(value)) {
    throw new InvalidArgumentError(`use one of ${OPERATION_KINDS.join(', ')}`);
  }
  return value;
}

function fieldsOf(value: string): Record<string, string | null> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError(
      'not JSON; quote an object such as \'{"rawDataPackageId":"…","locationId":"…"}\'',
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InvalidArgumentError('use a JSON object of field names to values');
  }
  return parsed as Record<string, string | null>;
}

/**
 * `opstate submit <kind> --fields JSON [--inputs ID,…] [--max-retries N] [--deadline 2h]
 * [--not-before TIME|10m] [--priority N] [--by NAME] [--json]`: validated as the API validates it (`runtime.submit`); prints the new operation's id.
 * The history records it as by `operator` unless `--by` names someone else.
 *
 * @example
 * ```ts
 * await createSubmitCommand(open).run(['long_term_archive', '--fields',
 *   JSON.stringify({ rawDataPackageId, sourceLocationId, destinationLocationId }),
 *   '--inputs', copyId], io);
 * ```
 */
export function createSubmitCommand(open: DatabaseOpener = databaseFromEnv): Command {
  return defineCommand('submit', SUMMARY, (program, ctx) => {
    program
      .command('submit')
      .description(SUMMARY)
      .argument('<kind>', `the operation kind: ${OPERATION_KINDS.join(', ')}`, kindOf)
      .requiredOption('--fields <json>', "the kind's fields, a JSON object", fieldsOf)
      .option('--inputs <ids>', 'the physical copies it consumes, comma-separated')
      .option('--max-retries <n>', 'returns to PENDING before it FAILS', wholeNumber(0))
      .option(
        '--deadline <duration>',
        "how long one attempt may run (30s, 90m, 2h, at most 7d) instead of the kind's deadline",
        parseDuration,
      )
      .option(
        '--not-before <time>',
        'start no earlier than this: an ISO time with its zone (2026-12-05T18:00:00Z) or a delay (10m)',
        (value: string) => parseNotBefore(value),
      )
      .option('--priority <n>', `higher is claimed first: ${PRIORITY_ALLOWED}`, (value: string) => {
        const n = /^-?\d+$/.test(value) ? Number(value) : Number.NaN;
        const problem = priorityProblem(n);
        if (problem !== undefined)
          throw new InvalidArgumentError(`priority ${problem.replace('NaN', `'${value}'`)}`);
        return n;
      })
      .option('--by <name>', `who submits, as the history records it (default ${OPERATOR})`)
      .option('--json', 'print {"id", "kind"}')
      .action(
        ctx.action(async (cmd) => {
          const [kind] = cmd.processedArgs as [OperationKind];
          const o = optionsOf<{
            fields: Record<string, string | null>;
            inputs?: string;
            maxRetries?: number;
            deadline?: number;
            notBefore?: string;
            priority?: number;
            by?: string;
            json?: boolean;
          }>(cmd);
          const inputs = o.inputs
            ?.split(',')
            .map((s) => s.trim())
            .filter(Boolean);
          if (o.inputs !== undefined && inputs?.length === 0) {
            throw new UsageError('--inputs is empty; give copy ids separated by commas');
          }
          const database = await open({ io: ctx.io, creates: true });
          try {
            // The fields come from the command line: checked by the store, not the compiler.
            const id = await new OperationStore(database).create({
              kind,
              fields: o.fields,
              ...(inputs === undefined ? {} : { inputs }),
              ...(o.maxRetries === undefined ? {} : { maxRetries: o.maxRetries }),
              ...(o.deadline === undefined ? {} : { deadlineMs: o.deadline }),
              ...(o.notBefore === undefined ? {} : { notBefore: o.notBefore }),
              ...(o.priority === undefined ? {} : { priority: o.priority }),
              by: o.by ?? OPERATOR,
            } as CreateOperationInput);
            ctx.io.out(o.json === true ? JSON.stringify({ id, kind }) : id);
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const submitCommand = createSubmitCommand();
