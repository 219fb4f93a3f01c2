import { InvalidArgumentError } from 'commander';
import {
  HistoryRetentionRepository,
  MIN_KEEP_MS,
  MIN_PARTITION_IDS,
  type PruneStep,
  type RetentionPolicy,
} from '../../persistence/HistoryRetention.ts';
import { type Command, defineCommand, type Io, optionsOf, wholeNumber } from '../Command.ts';
import { parseDuration } from '../duration.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY = 'How long the transition history is kept, and its partitions';

/** A parsed `--keep`: milliseconds, or null for ever. */
interface Keep {
  readonly ms: number | null;
}

/** `--keep`: a duration of at least a day, or `forever`. */
function keepOf(value: string): number | null {
  if (value === 'forever') return null;
  return parseDuration(value);
}

/** A keep as the operator would type it: `400d`, `36h`, `90m`, `45s`. */
function keepText(keepMs: number | null): string {
  if (keepMs === null) return 'for ever';
  for (const [unit, ms] of [
    ['d', MIN_KEEP_MS],
    ['h', 3_600_000],
    ['m', 60_000],
  ] as const) {
    if (keepMs % ms === 0) return `${keepMs / ms}${unit}`;
  }
  return `${keepMs / 1000}s`;
}

function policyLine(p: RetentionPolicy): string {
  return `history kept ${keepText(p.keepMs)}; partitions of ${p.partitionIds.toLocaleString('en')} ids (set by ${p.setBy}, ${p.setAt.toISOString()})`;
}

function stepLine(s: PruneStep): string {
  const ids = `ids ${s.lowerId ?? '−∞'}–${s.upperId === null ? '' : s.upperId - 1}`;
  const rows = s.rows === null ? '' : `, ${s.rows.toLocaleString('en')} rows`;
  return `${s.dropped ? 'dropped' : 'kept   '} ${s.name} (${ids}${rows}): ${s.reason}`;
}

function printPrune(result: { dropped: readonly PruneStep[]; kept: readonly PruneStep[] }, io: Io) {
  if (result.dropped.length === 0 && result.kept.length === 0) {
    io.out('nothing to prune: the policy keeps everything, or no partition is whole yet');
    return;
  }
  for (const s of [...result.dropped, ...result.kept]) io.out(stepLine(s));
}

/**
 * `opstate retention set --keep 400d|forever [--partition-ids N]`, `opstate retention show
 * [--json]` and `opstate retention prune [--json]`: the transition history's retention policy,
 * kept in the database. The control plane's leader applies it every `historyIntervalMs`, dropping
 * whole partitions of the history that are older than the policy keeps and hold no live
 * operation's transitions; `prune` does the same now. Lineage, archive records and deletion
 * records are never pruned. A keep under a day, or a width that is not a whole number of at least
 * 1,000 ids, is refused and changes nothing.
 *
 * @example
 * ```ts
 * await createRetentionCommand(() => Promise.resolve(database)).run(['set', '--keep', '400d'], io);
 * ```
 */
export function createRetentionCommand(open: DatabaseOpener = databaseFromEnv): Command {
  return defineCommand('retention', SUMMARY, (program, ctx) => {
    const withRetention = async <T>(fn: (r: HistoryRetentionRepository) => Promise<T>) => {
      const database = await open({ io: ctx.io });
      try {
        return await fn(new HistoryRetentionRepository(database));
      } finally {
        await database.close();
      }
    };
    const retention = program.command('retention').description(SUMMARY);
    retention
      .command('set')
      .description('Set how long the history is kept (default: for ever)')
      .requiredOption(
        '--keep <duration>',
        'keep every transition at least this long, e.g. 400d (at least 1d), or forever',
        (v: string): Keep => {
          const ms = keepOf(v);
          if (ms !== null && ms < MIN_KEEP_MS) {
            throw new InvalidArgumentError('keep the history at least a day (1d), or forever');
          }
          // Wrapped: commander takes an option parsed to null for one not given.
          return { ms };
        },
      )
      .option(
        '--partition-ids <n>',
        `how many ids each partition made from now on spans (at least ${MIN_PARTITION_IDS}; default 5,000,000)`,
        wholeNumber(MIN_PARTITION_IDS),
      )
      .option('--by <name>', 'who sets it, as `opstate retention show` prints (default operator)')
      .option('--json', 'print the policy as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            keep: Keep;
            partitionIds?: number;
            by?: string;
            json?: boolean;
          }>(cmd);
          const policy = await withRetention((r) =>
            r.set({
              keepMs: o.keep.ms,
              ...(o.partitionIds === undefined ? {} : { partitionIds: o.partitionIds }),
              ...(o.by === undefined ? {} : { by: o.by }),
            }),
          );
          ctx.io.out(o.json === true ? JSON.stringify(policy) : policyLine(policy));
          return 0;
        }),
      );
    retention
      .command('show')
      .description('The policy, the partitions of the history and any rows outside them')
      .option('--json', 'print {"policy","partitions","spilled"} as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const shown = await withRetention(async (r) => ({
            policy: await r.policy(),
            partitions: await r.partitions(),
            spilled: await r.spilled(),
          }));
          if (json === true) {
            ctx.io.out(JSON.stringify(shown));
            return 0;
          }
          ctx.io.out(policyLine(shown.policy));
          for (const p of shown.partitions) {
            const ids = p.isDefault
              ? 'default: ids past every partition'
              : `ids ${p.lowerId ?? '−∞'}–${(p.upperId as number) - 1}`;
            const rows = p.estimatedRows < 0 ? 'not yet counted' : `~${p.estimatedRows} rows`;
            ctx.io.out(`${p.name.padEnd(40)} ${ids} (${rows})`);
          }
          if (shown.spilled > 0) {
            ctx.io.out(
              `${shown.spilled} transitions are in the default partition: partitions were not made in time, and these rows stay outside retention`,
            );
          }
          return 0;
        }),
      );
    retention
      .command('prune')
      .description('Drop now what the policy lets go, as the leader does every pass')
      .option('--json', 'print {"dropped","kept"} as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const result = await withRetention((r) => r.prune());
          if (json === true) ctx.io.out(JSON.stringify(result));
          else printPrune(result, ctx.io);
          return 0;
        }),
      );
  });
}

export const retentionCommand: Command = createRetentionCommand();
