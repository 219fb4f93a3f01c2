import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { selectStatusCounts } from '../../persistence/sql/controlPlaneQueries.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';

/**
 * `opstate status [--json]`: operation counts per kind × status, every kind and status shown.
 * JSON shape: `{"operations": {"<kind>": {"PENDING": n, …, "FAILED": n}}}`.
 *
 * @example
 * ```ts
 * await createStatusCommand(() => Promise.resolve(database)).run(['--json'], io);
 * ```
 */
export function createStatusCommand(open: () => Promise<Database> = () => openDatabase()): Command {
  return {
    name: 'status',
    summary: 'Operation counts per kind and status',
    usage: 'opstate status [--json]',
    async run(args, io) {
      const { values, positionals } = parseFlags(args, { json: { type: 'boolean' } });
      if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
      const database = await open();
      try {
        const counts = await selectStatusCounts(database);
        if (values.json === true) {
          io.out(JSON.stringify({ operations: counts }));
          return 0;
        }
        const width = Math.max(...OPERATION_KINDS.map((k) => k.length), 'kind'.length);
        const cols = OPERATION_STATUSES.map((s) => s.length);
        io.out(['kind'.padEnd(width), ...OPERATION_STATUSES].join('  '));
        for (const kind of OPERATION_KINDS) {
          const cells = OPERATION_STATUSES.map((s, n) =>
            String(counts[kind][s]).padStart(cols[n] as number),
          );
          io.out([kind.padEnd(width), ...cells].join('  '));
        }
        return 0;
      } finally {
        await database.close();
      }
    },
  };
}

export const statusCommand: Command = createStatusCommand();
