import { OPERATOR } from '../../machines/actors.ts';
import { systemClock } from '../../machines/Clock.ts';
import type { PipelineRollback } from '../../persistence/publicRecords.ts';
import { rollbackFor } from '../../runtime/rollbackOnRequest.ts';
import { argumentsOf, type Command, defineCommand, optionsOf } from '../Command.ts';
import { loadPipeline } from '../loadPipeline.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { cliOperatorName } from './operatorCommands.ts';

/**
 * The plan as an operator reads it: every stage redone in run order with its operations, what
 * the rollback creates, the copies it supersedes, and who and which row recorded it.
 *
 * @example
 * ```ts
 * io.out(describeRollback(await runtime.rollback({ artifact, to: 'bundling', dryRun: true })));
 * ```
 */
export function describeRollback(r: PipelineRollback): string {
  const width = Math.max(...r.stages.map((s) => s.length));
  const lines = [
    `${r.dryRun ? 'dry run (nothing changed): ' : ''}rollback of ${r.artifact.type} ${r.artifact.id} to '${r.stage}' (pipeline '${r.pipeline}')`,
    `redo, in order: ${r.stages.join(', ')}`,
  ];
  if (r.widened.length > 0) {
    lines.push(
      `with its bundle-mates (a stage of the bundle produces them again): ${r.widened.join(', ')}`,
    );
  }
  for (const stage of r.stages) {
    const name = stage.padEnd(width);
    const redone = r.redone.filter((o) => o.stage === stage);
    const created = r.created.filter((c) => c.stage === stage);
    const old = redone.map((o) => `${o.operationId} (${o.status})`).join(', ');
    if (stage === r.stage) {
      const made = created
        .map((c) => (c.operationId === null ? `one for ${c.subjectId}` : `${c.operationId}`))
        .join(', ');
      lines.push(
        `  ${name}  supersedes ${old}; ${r.dryRun ? 'would create' : 'created'} ${made} (PENDING)`,
      );
    } else {
      lines.push(
        `  ${name}  ${redone.length === 0 ? 'no operation yet' : `supersedes ${old}`}; the pipeline's pass creates it again from the re-run, once`,
      );
    }
  }
  lines.push(
    r.superseded.length === 0
      ? 'superseded copies: none'
      : 'superseded copies (the re-run produces each again; none is deleted):',
  );
  for (const c of r.superseded) {
    lines.push(
      `  ${c.copyId} ${c.artifactType} ${c.artifactId} at ${c.location} (${c.status}), from ${c.stage}`,
    );
  }
  lines.push(
    r.rollbackId === null
      ? `would be recorded as by ${r.by}; run it again without --dry-run to roll back`
      : `recorded as rollback ${r.rollbackId} by ${r.by}`,
  );
  return lines.join('\n');
}

/**
 * `opstate rollback <artifact> --to <stage> --pipeline <module> [--dry-run] [--operator NAME]
 * [--json]`: rolls a raw data package or data transfer package back to a stage of the pipeline
 * the control plane runs (the same module as `opstate control-plane --pipeline`): the stage and
 * every later stage run again, once, recorded as by `operator:<name>` (`cliOperatorName`). Prints
 * the plan; `--dry-run` prints it and changes nothing. Written to the database alone: the control
 * plane schedules the re-run and its pass creates the later stages. An unknown stage, an id that
 * is no uuid or a stage the artifact never reached exits 2; an unknown artifact, a live operation
 * to redo, or a re-run that would read a copy that is gone exits 1; nothing is changed then.
 *
 * @example
 * ```ts
 * await createRollbackCommand(open).run([pkg, '--to', 'bundling', '--pipeline', './p.js', '--dry-run'], io);
 * ```
 */
export function createRollbackCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary = "Redo a package's pipeline from a stage on: that stage and every later one, once";
  return defineCommand('rollback', summary, (program, ctx) => {
    program
      .command('rollback')
      .description(summary)
      .argument('<artifact>', 'the raw data package or data transfer package')
      .requiredOption('--to <stage>', 'the stage of the pipeline to redo from')
      .requiredOption(
        '--pipeline <module>',
        'the pipeline the control plane runs (the module given to opstate control-plane --pipeline)',
      )
      .option('--dry-run', 'print the plan and change nothing')
      .option(
        '--operator <name>',
        'who to record it as by (default: OPSTATE_OPERATOR, else the user running this)',
      )
      .option('--json', 'print the rollback as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const [artifact] = argumentsOf(cmd) as [string];
          const o = optionsOf<{
            to: string;
            pipeline: string;
            dryRun?: boolean;
            operator?: string;
            json?: boolean;
          }>(cmd);
          const pipeline = await loadPipeline(o.pipeline);
          const by = `${OPERATOR}:${cliOperatorName(o.operator)}`;
          const database = await open({ io: ctx.io });
          try {
            const r = await rollbackFor(
              { database, clock: systemClock, wake: () => undefined, pipeline },
              { artifact, to: o.to, dryRun: o.dryRun === true },
              by,
            );
            ctx.io.out(o.json === true ? JSON.stringify(r) : describeRollback(r));
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const rollbackCommand = createRollbackCommand();
