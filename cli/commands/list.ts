import { Option } from 'commander';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES, type OperationStatus } from '../../machines/operationMachine.ts';
import { PACKAGE_STATES, type PackageState } from '../../machines/packageState.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { listOperations } from '../../persistence/reads/listOperations.ts';
import { listPackagesInState } from '../../persistence/reads/listPackagesInState.ts';
import {
  type Command,
  defineCommand,
  type Io,
  optionsOf,
  UsageError,
  wholeNumber,
} from '../Command.ts';
import { parseSince } from '../duration.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY =
  'List operations, newest first, by kind, status and age; or packages by derived state';

/** `opstate list --package-state S`: the packages in that derived state, in id order. */
async function listPackages(
  database: Database,
  state: PackageState,
  limit: number,
  json: boolean,
  io: Io,
): Promise<number> {
  const { rows } = await listPackagesInState(database, state, { limit });
  if (json) {
    io.out(JSON.stringify(rows));
    return 0;
  }
  for (const r of rows) io.out(`${r.id}  ${r.type.padEnd(21)}  ${r.state.padEnd(12)}  ${r.name}`);
  if (rows.length === 0) io.err(`no package is ${state}`);
  return 0;
}

/**
 * `opstate list [--kind K] [--status S] [--since 2h|ISO] [--limit N] [--json]`; with
 * `--package-state S` the raw data packages and data transfer packages whose derived state is S
 * instead (`[{type, id, name, state}]`), which the operation filters do not go with.
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
      .addOption(
        new Option(
          '--package-state <state>',
          'list the packages (raw data and data transfer) in this derived state instead',
        ).choices(PACKAGE_STATES),
      )
      .option('--json', 'print a JSON array of {id, kind, status, attempt, …}')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            kind?: OperationKind;
            status?: OperationStatus;
            since?: Date;
            limit: number;
            json?: boolean;
            packageState?: PackageState;
          }>(cmd);
          if (o.packageState !== undefined && (o.kind ?? o.status ?? o.since) !== undefined) {
            throw new UsageError(
              '--package-state lists packages; --kind, --status and --since filter operations: use one or the other',
            );
          }
          const database = await open({ io: ctx.io });
          try {
            if (o.packageState !== undefined) {
              return await listPackages(database, o.packageState, o.limit, o.json === true, ctx.io);
            }
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
