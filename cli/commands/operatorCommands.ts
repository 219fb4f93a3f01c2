import { replan } from '../../actors/replan.ts';
import { type OperatorAction, operatorEvent } from '../../machines/operatorEvent.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { runtimeFromEnv } from '../runtimeFromEnv.ts';

function operatorCommand(name: OperatorAction, summary: string): Command {
  return {
    name,
    summary,
    usage: `opstate ${name} <operation id> [--reason TEXT]${name === 'retry' ? ' [--replan]' : ''}`,
    async run(args, io) {
      const { values, positionals } = parseFlags(args, {
        reason: { type: 'string' },
        ...(name === 'retry' ? { replan: { type: 'boolean' as const } } : {}),
      });
      const [id, extra] = positionals;
      if (id === undefined) throw new UsageError('the operation id is required');
      if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
      const runtime = await runtimeFromEnv();
      try {
        if ((values as { replan?: boolean }).replan === true) {
          const r = await replan(runtime, id, values.reason ?? 're-planned by an operator');
          io.out(
            r.replanned === 'operation'
              ? `${id}: plan generation ${r.generation} recorded beside the old one; FAILED → ${r.status}`
              : `${id}: source copy ${r.copyId} deletion re-planned: DELETION_FAILED → ${r.status} (a deleter plans it again)`,
          );
          return 0;
        }
        const t = await runtime.command(id, operatorEvent(name, values.reason));
        io.out(`${id}: ${t.from} → ${t.status} (attempt ${t.context.attempt})`);
        return 0;
      } finally {
        await runtime.close();
      }
    },
  };
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
