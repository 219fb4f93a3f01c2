import { Option } from 'commander';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../../machines/operationMachine.ts';
import { listOperations } from '../../persistence/reads/listOperations.ts';
import { type Command, defineCommand, optionsOf, wholeNumber } from '../Command.ts';
import { parseSince } from '../duration.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'List operations, newest first, by kind, status and age';

/**
 * `opstate list [--kind K] [--status S] [--since 2h|ISO] [--limit N] [--json]`.
 *
 * @example
 * ```ts
 * await createListCommand(open).run(['--status', 'FAILED', '--json'], io);
 * ```
 */
export function createListCommand(open: DatabaseOpener = databaseFromEnv): Command {
  return defineCommand('list', SUMMARY, (program, ctx) => {
    program
      .command('list')
      .description(SUMMARY)
      .addOption(new Option('--kind <kind>', 'only this kind').choices(OPERATION_KINDS))
      .addOption(new Option('--status <status>', 'only this status').choices(OPERATION_STATUSES))
      .option('--since <when>', 'created since: an age (30m, 2h, 1d) or an ISO time', (v) =>
        parseSince(v),
      )
      .option('--limit <n>', 'at most this many', wholeNumber(1), 100)
      .option('--json', 'print a JSON array of {id, kind, status, attempt, …}')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            kind?: OperationKind;
            status?: OperationStatus;
            since?: Date;
            limit: number;
            json?: boolean;
          }>(cmd);
          const database = await open({ io: ctx.io });
          try {
            const rows = await listOperations(database, {
              limit: o.limit,
              ...(o.kind === undefined ? {} : { kind: o.kind }),
              ...(o.status === undefined ? {} : { status: o.status }),
              ...(o.since === undefined ? {} : { since: o.since }),
            });
            if (o.json === true) {
              ctx.io.out(JSON.stringify(rows));
              return 0;
            }
            for (const r of rows) {
              const error = r.lastError === null ? '' : `  ${r.lastError}`;
              ctx.io.out(
                `${r.id}  ${r.kind.padEnd(21)}  ${r.status.padEnd(11)}  #${r.attempt}  ${r.createdAt.toISOString()}${error}`,
              );
            }
            if (rows.length === 0) ctx.io.err('no operation matches');
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const listCommand = createListCommand();
