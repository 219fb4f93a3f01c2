import { replan } from '../../actors/replan.ts';
import { type OperatorAction, operatorEvent } from '../../machines/operatorEvent.ts';
import { argumentsOf, defineCommand, optionsOf } from '../Command.ts';
import { runtimeFromEnv } from '../runtimeFromEnv.ts';

function operatorCommand(name: OperatorAction, summary: string) {
  return defineCommand(name, summary, (program, ctx) => {
    const command = program
      .command(name)
      .description(summary)
      .argument('<operation-id>', 'the operation')
      .option('--reason <text>', 'why, kept in the transition history')
      .option('--json', 'print the outcome as one JSON object');
    if (name === 'retry') {
      command.option(
        '--replan',
        'plan a FAILED operation anew, or re-plan a failed source deletion',
      );
    }
    command.action(
      ctx.action(async (cmd) => {
        const [id] = argumentsOf(cmd) as [string];
        const o = optionsOf<{ reason?: string; json?: boolean; replan?: boolean }>(cmd);
        const runtime = await runtimeFromEnv();
        try {
          if (o.replan === true) {
            const r = await replan(runtime, id, o.reason ?? 're-planned by an operator');
            ctx.io.out(
              o.json === true
                ? JSON.stringify({ id, ...r })
                : r.replanned === 'operation'
                  ? `${id}: plan generation ${r.generation} recorded beside the old one; FAILED → ${r.status}`
                  : `${id}: source copy ${r.copyId} deletion re-planned: DELETION_FAILED → ${r.status} (a deleter plans it again)`,
            );
            return 0;
          }
          const t = await runtime.command(id, operatorEvent(name, o.reason));
          ctx.io.out(
            o.json === true
              ? JSON.stringify({ id, from: t.from, to: t.status, attempt: t.context.attempt })
              : `${id}: ${t.from} → ${t.status} (attempt ${t.context.attempt})`,
          );
          return 0;
        } finally {
          await runtime.close();
        }
      }),
    );
  });
}

export const retryCommand = operatorCommand(
  'retry',
  'Send a FAILED operation back to PENDING with a fresh retry budget (--replan: plan it anew)',
);
export const resetCommand = operatorCommand(
  'reset',
  'Send a SCHEDULED or IN_PROGRESS operation back to PENDING (a new, fenced attempt)',
);
export const cancelCommand = operatorCommand(
  'cancel',
  'Move a live operation to FAILED with the reason',
);
