import { systemClock } from '../../machines/Clock.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import { checkId } from '../../persistence/applyEvents.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { argumentsOf, type Command, defineCommand, optionsOf } from '../Command.ts';
import { parseDuration } from '../duration.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY =
  'Wait for an operation to finish: exit 0 when COMPLETED, 1 when FAILED or timed out';

/**
 * `opstate wait <id> [--timeout 10m] [--json]`: polls until the operation is COMPLETED (exit 0) or
 * FAILED (exit 1), or the timeout passes (exit 1, saying where it stands).
 *
 * @example
 * ```ts
 * const code = await createWaitCommand(open).run([id, '--timeout', '30s'], io);
 * ```
 */
export function createWaitCommand(open: DatabaseOpener = databaseFromEnv, pollMs = 250): Command {
  return defineCommand('wait', SUMMARY, (program, ctx) => {
    program
      .command('wait')
      .description(SUMMARY)
      .argument('<operation-id>', 'the operation')
      .option('--timeout <duration>', 'give up after this long (30s, 10m, 2h)', parseDuration)
      .option('--json', 'print {"id", "status", "attempt", "lastError", "timedOut"}')
      .action(
        ctx.action(async (cmd) => {
          const [id] = argumentsOf(cmd) as [string];
          const o = optionsOf<{ timeout?: number; json?: boolean }>(cmd);
          checkId(id);
          const deadline =
            o.timeout === undefined ? Number.POSITIVE_INFINITY : systemClock.now() + o.timeout;
          const database = await open({ io: ctx.io });
          try {
            const store = new OperationStore(database);
            for (;;) {
              const op = await store.load(id);
              const done =
                op.status === OperationStatus.COMPLETED || op.status === OperationStatus.FAILED;
              const timedOut = !done && systemClock.now() >= deadline;
              if (done || timedOut) {
                const report = {
                  id,
                  status: op.status,
                  attempt: op.attempt,
                  lastError: op.lastError?.message ?? null,
                  timedOut,
                };
                if (o.json === true) ctx.io.out(JSON.stringify(report));
                else if (timedOut) {
                  ctx.io.err(
                    `${id} is still ${op.status} (attempt ${op.attempt}); run 'opstate inspect ${id}' to see why`,
                  );
                } else {
                  ctx.io.out(
                    `${id} ${op.status} (attempt ${op.attempt})${report.lastError === null ? '' : `: ${report.lastError}`}`,
                  );
                }
                return op.status === OperationStatus.COMPLETED ? 0 : 1;
              }
              await systemClock.sleep(Math.min(pollMs, Math.max(1, deadline - systemClock.now())));
            }
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const waitCommand = createWaitCommand();
