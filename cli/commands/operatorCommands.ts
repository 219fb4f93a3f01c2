import { hostname, userInfo } from 'node:os';
import { OPERATOR, operatorActor, operatorNameProblem } from '../../machines/actors.ts';
import { systemClock } from '../../machines/Clock.ts';
import { type OperatorAction, operatorEvent } from '../../machines/operatorEvent.ts';
import { JournalRepository } from '../../persistence/JournalRepository.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { readSetting } from '../../runtime/Configuration.ts';
import { applyOperatorCommand } from '../../runtime/operatorCommand.ts';
import { replan } from '../../runtime/replan.ts';
import { argumentsOf, defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

/** The user running this process, when that is a name an operator may have; else `operator`. */
function userName(): string {
  try {
    const name = userInfo().username;
    return operatorNameProblem(name) === undefined ? name : OPERATOR;
  } catch {
    return OPERATOR;
  }
}

/**
 * Who a command of this process is recorded as by: `--operator`, else `OPSTATE_OPERATOR`, else
 * the user running it, and from this host: `operator:alice (cli, host-1)`.
 *
 * @example
 * ```ts
 * await applyOperatorCommand(store, clock, id, event, cliOperator(flags.operator));
 * ```
 */
export function cliOperator(flag: string | undefined): string {
  return operatorActor(cliOperatorName(flag), `cli, ${hostname()}`);
}

/**
 * The operator's name alone: `--operator`, else `OPSTATE_OPERATOR`, else the user running this
 * process (what a creation, which records a submitter name, is recorded as by: `operator:alice`).
 *
 * @example
 * ```ts
 * const by = `operator:${cliOperatorName(flags.operator)}`;
 * ```
 */
export function cliOperatorName(flag: string | undefined): string {
  return readSetting(process.env, 'OPSTATE_OPERATOR', flag) ?? userName();
}

/**
 * `opstate retry|reset|cancel <operation-id> [--reason R] [--operator NAME] [--json]`: an
 * operator command, recorded as by the operator (`cliOperator`), written
 * to the database alone. It needs no broker: the control plane schedules what returns to PENDING,
 * and fencing retires whatever a worker still runs of an old attempt. So it works while NATS is
 * down, and never creates a database (there is no operation to act on in a new one).
 *
 * @example
 * ```ts
 * await createOperatorCommand('cancel', 'Cancel', open).run([id, '--reason', 'not wanted'], io);
 * ```
 */
export function createOperatorCommand(
  name: OperatorAction,
  summary: string,
  open: DatabaseOpener = databaseFromEnv,
) {
  return defineCommand(name, summary, (program, ctx) => {
    const command = program
      .command(name)
      .description(summary)
      .argument('<operation-id>', 'the operation')
      .option('--reason <text>', 'why, kept in the transition history')
      .option(
        '--operator <name>',
        'who to record it as by (default: OPSTATE_OPERATOR, else the user running this)',
      )
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
        const o = optionsOf<{
          reason?: string;
          json?: boolean;
          replan?: boolean;
          operator?: string;
        }>(cmd);
        const by = cliOperator(o.operator);
        const database = await open({ io: ctx.io });
        const store = new OperationStore(database);
        const desk = {
          database,
          journal: new JournalRepository(database),
          command: (target: string, event: Parameters<typeof applyOperatorCommand>[3]) =>
            applyOperatorCommand(store, systemClock, target, event, by),
        };
        try {
          if (o.replan === true) {
            const r = await replan(desk, id, o.reason ?? 're-planned by an operator', by);
            ctx.io.out(
              o.json === true
                ? JSON.stringify({ id, ...r })
                : r.replanned === 'operation'
                  ? `${id}: plan generation ${r.generation} recorded beside the old one; FAILED → ${r.status}`
                  : `${id}: source copy ${r.copyId} deletion re-planned: DELETION_FAILED → ${r.status} (a deleter plans it again)`,
            );
            return 0;
          }
          const t = await desk.command(id, operatorEvent(name, o.reason));
          ctx.io.out(
            o.json === true
              ? JSON.stringify({ id, from: t.from, to: t.status, attempt: t.context.attempt })
              : `${id}: ${t.from} → ${t.status} (attempt ${t.context.attempt})`,
          );
          return 0;
        } finally {
          await database.close();
        }
      }),
    );
  });
}

export const retryCommand = createOperatorCommand(
  'retry',
  'Send a FAILED operation back to PENDING with a fresh retry budget (--replan: plan it anew)',
);
export const resetCommand = createOperatorCommand(
  'reset',
  'Send a SCHEDULED or IN_PROGRESS operation back to PENDING (a new, fenced attempt)',
);
export const cancelCommand = createOperatorCommand(
  'cancel',
  'Move a live operation to FAILED with the reason',
);
