import type { OperationEvent } from '../../machines/operationMachine.ts';
import { argumentsOf, defineCommand, optionsOf } from '../Command.ts';
import { runtimeFromEnv } from '../runtimeFromEnv.ts';

function operatorCommand(
  name: 'retry' | 'reset' | 'cancel',
  summary: string,
  toEvent: (reason: string | undefined) => OperationEvent,
) {
  return defineCommand(name, summary, (program, ctx) => {
    program
      .command(name)
      .description(summary)
      .argument('<operation-id>', 'the operation')
      .option('--reason <text>', 'why, kept in the transition history')
      .option('--json', 'print {"id", "from", "to", "attempt"}')
      .action(
        ctx.action(async (cmd) => {
          const [id] = argumentsOf(cmd) as [string];
          const { reason, json } = optionsOf<{ reason?: string; json?: boolean }>(cmd);
          const runtime = await runtimeFromEnv();
          try {
            const t = await runtime.command(id, toEvent(reason));
            ctx.io.out(
              json === true
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
  'Send a FAILED operation back to PENDING with a fresh retry budget',
  (reason) => ({ type: 'RETRY', ...(reason === undefined ? {} : { reason }) }),
);
export const resetCommand = operatorCommand(
  'reset',
  'Send a SCHEDULED or IN_PROGRESS operation back to PENDING (a new, fenced attempt)',
  (reason) => ({ type: 'RESET', by: 'operator', reason: reason ?? 'reset by an operator' }),
);
export const cancelCommand = operatorCommand(
  'cancel',
  'Move a live operation to FAILED with the reason',
  (reason) => ({ type: 'CANCEL', reason: reason ?? 'cancelled by an operator' }),
);
