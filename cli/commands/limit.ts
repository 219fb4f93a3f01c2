import { type FlowLimit, FlowLimitRepository } from '../../persistence/FlowLimitRepository.ts';
import { type Command, defineCommand, type Io, optionsOf, wholeNumber } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'Cap how many operations run at once on a location (of one kind or of every kind)';

const KIND_HELP =
  'the operation kind it caps, e.g. long_term_archive (default: every kind together)';
const LOCATION_HELP = 'the location: its id or site/name, e.g. cologne/lta';

function line(l: FlowLimit): string {
  return `${l.location.padEnd(28)} ${(l.kind ?? '(every kind)').padEnd(22)} ${String(l.live).padStart(5)} live of ${l.max}${l.max === 0 ? ' (parked)' : ''}`;
}

function print(limits: readonly FlowLimit[], io: Io): void {
  if (limits.length === 0) {
    io.out('no flow limits: nothing caps how many operations run at once');
    return;
  }
  io.out(`${'location'.padEnd(28)} ${'kind'.padEnd(22)} running now`);
  for (const l of limits) io.out(line(l));
}

/**
 * `opstate limit set --location L [--kind K] --max N`, `opstate limit list [--json]` and
 * `opstate limit clear --location L [--kind K]`: flow limits, kept in the database and enforced by
 * every control plane's scheduler inside its claim. A max of 0 parks the location. An unknown
 * location or kind, or a max that is not a whole number, is refused and changes nothing.
 *
 * @example
 * ```ts
 * await createLimitCommand(() => Promise.resolve(database))
 *   .run(['set', '--kind', 'long_term_archive', '--location', 'cologne/lta', '--max', '2'], io);
 * ```
 */
export function createLimitCommand(open: DatabaseOpener = databaseFromEnv): Command {
  return defineCommand('limit', SUMMARY, (program, ctx) => {
    // A limit names a registered location, so every sub-command needs a database that exists.
    const withLimits = async <T>(fn: (l: FlowLimitRepository) => Promise<T>) => {
      const database = await open({ io: ctx.io });
      try {
        return await fn(new FlowLimitRepository(database));
      } finally {
        await database.close();
      }
    };
    const limit = program.command('limit').description(SUMMARY);
    limit
      .command('set')
      .description('Set the limit of a location, or of one kind at it (replaces the one there)')
      .requiredOption('--location <location>', LOCATION_HELP)
      .option('--kind <kind>', KIND_HELP)
      .requiredOption(
        '--max <n>',
        'at most this many SCHEDULED or IN_PROGRESS at once; 0 parks it',
        wholeNumber(0),
      )
      .option('--by <name>', 'who sets it, as `opstate limit list` shows (default operator)')
      .option('--json', 'print the limit as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            location: string;
            kind?: string;
            max: number;
            by?: string;
            json?: boolean;
          }>(cmd);
          const set = await withLimits((l) =>
            l.set({
              location: o.location,
              kind: o.kind ?? null,
              max: o.max,
              ...(o.by === undefined ? {} : { by: o.by }),
            }),
          );
          ctx.io.out(o.json === true ? JSON.stringify(set) : line(set));
          return 0;
        }),
      );
    limit
      .command('list')
      .description('Every limit, with what runs in its scope now')
      .option('--json', 'print one JSON array of limits')
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const limits = await withLimits((l) => l.list());
          if (json === true) ctx.io.out(JSON.stringify(limits));
          else print(limits, ctx.io);
          return 0;
        }),
      );
    limit
      .command('clear')
      .description('Remove the limit of a location (or of one kind at it); its work resumes')
      .requiredOption('--location <location>', LOCATION_HELP)
      .option('--kind <kind>', `${KIND_HELP.replace('it caps', 'whose limit to remove')}`)
      .option('--json', 'print {"removed"}: the limit as it was, or null')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{ location: string; kind?: string; json?: boolean }>(cmd);
          const removed = await withLimits((l) =>
            l.clear({ location: o.location, kind: o.kind ?? null }),
          );
          if (o.json === true) ctx.io.out(JSON.stringify({ removed }));
          else if (removed === null) ctx.io.out(`no such limit at ${o.location}: nothing to clear`);
          else ctx.io.out(`cleared: ${line(removed)}`);
          return 0;
        }),
      );
  });
}

export const limitCommand: Command = createLimitCommand();
