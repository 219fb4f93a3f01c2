import { InvalidArgumentError } from 'commander';
import {
  type HistoryPartition,
  HistoryRetentionRepository,
  MAX_JOURNAL_DAYS,
  MIN_KEEP_MS,
  MIN_PARTITION_IDS,
  type PruneStep,
  type RetentionPolicy,
} from '../../persistence/HistoryRetention.ts';
import {
  type JournalPruneStep,
  JournalRetentionRepository,
  type JournalSpan,
} from '../../persistence/JournalRetention.ts';
import type { Executor } from '../../persistence/openDatabase.ts';
import { type Command, defineCommand, type Io, optionsOf, wholeNumber } from '../Command.ts';
import { parseDuration } from '../duration.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

const SUMMARY =
  'How long the transition history, the step journal and the failure breadcrumbs are kept, and their partitions';

/** A parsed `--keep`: milliseconds, or null for ever. */
interface Keep {
  readonly ms: number | null;
}

/** `--keep`: a duration of at least a day, or `forever`. */
function keepOf(value: string): number | null {
  if (value === 'forever') return null;
  return parseDuration(value);
}

/** Parses `--keep`; wrapped, since commander takes an option parsed to null for one not given. */
function keepOption(value: string): Keep {
  const ms = keepOf(value);
  if (ms !== null && ms < MIN_KEEP_MS) {
    throw new InvalidArgumentError('keep the history at least a day (1d), or forever');
  }
  return { ms };
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
  const pruned =
    p.journalPrunedBelow === null ? '' : `; journal dropped below ${p.journalPrunedBelow}`;
  return `history kept ${keepText(p.keepMs)}; partitions of ${p.partitionIds.toLocaleString('en')} ids, journal spans of ${p.journalDays} days${pruned} (set by ${p.setBy}, ${p.setAt.toISOString()})`;
}

function journalStepLine(s: JournalPruneStep): string {
  const rows = s.rows === null ? '' : ` (${s.rows.toLocaleString('en')} rows)`;
  return `${s.dropped ? 'dropped' : 'kept   '} journal span ${s.suffix}${rows}: ${s.reason}`;
}

function spanLine(s: JournalSpan): string {
  const ids = s.isDefault
    ? 'default: operations past every span'
    : `operations ${s.lowerId ?? '−∞'} up to ${s.upperId}`;
  const rows = s.estimatedRows < 0 ? 'not yet counted' : `~${s.estimatedRows} rows`;
  return `journal span ${s.suffix.padEnd(27)} ${ids} (${rows})`;
}

/** What `retention show` reads. */
interface Shown {
  readonly policy: RetentionPolicy;
  readonly partitions: readonly HistoryPartition[];
  readonly spilled: number;
  readonly journal: readonly JournalSpan[];
  readonly journalSpilled: number;
}

/** What `retention show` prints without `--json`. */
function printShown(shown: Shown, io: Io) {
  io.out(policyLine(shown.policy));
  for (const p of shown.partitions) {
    const ids = p.isDefault
      ? 'default: ids past every partition'
      : `ids ${p.lowerId ?? '−∞'}–${(p.upperId as number) - 1}`;
    const rows = p.estimatedRows < 0 ? 'not yet counted' : `~${p.estimatedRows} rows`;
    io.out(`${p.name.padEnd(40)} ${ids} (${rows})`);
  }
  if (shown.spilled > 0) {
    io.out(
      `${shown.spilled} transitions are in the default partition: partitions were not made in time, and these rows stay outside retention`,
    );
  }
  for (const span of shown.journal) io.out(spanLine(span));
  if (shown.journalSpilled > 0) {
    io.out(
      `${shown.journalSpilled} steps or failure breadcrumbs are in the journal's default partitions: spans were not made in time, or an operation id came from a clock far from the database server's; these rows stay outside retention`,
    );
  }
}

/** Both repositories on one connection. */
const repositories = (exec: Executor) => ({
  history: new HistoryRetentionRepository(exec),
  journal: new JournalRetentionRepository(exec),
});

function stepLine(s: PruneStep): string {
  const ids = `ids ${s.lowerId ?? '−∞'}–${s.upperId === null ? '' : s.upperId - 1}`;
  const rows = s.rows === null ? '' : `, ${s.rows.toLocaleString('en')} rows`;
  return `${s.dropped ? 'dropped' : 'kept   '} ${s.name} (${ids}${rows}): ${s.reason}`;
}

interface Pruned {
  readonly dropped: readonly PruneStep[];
  readonly kept: readonly PruneStep[];
  readonly journal: {
    readonly dropped: readonly JournalPruneStep[];
    readonly kept: readonly JournalPruneStep[];
  };
}

function printPrune(result: Pruned, io: Io) {
  const { journal } = result;
  const steps = result.dropped.length + result.kept.length;
  if (steps + journal.dropped.length + journal.kept.length === 0) {
    io.out('nothing to prune: the policy keeps everything, or no partition is whole yet');
    return;
  }
  for (const s of [...result.dropped, ...result.kept]) io.out(stepLine(s));
  for (const s of [...journal.dropped, ...journal.kept]) io.out(journalStepLine(s));
}

/**
 * `opstate retention set --keep 400d|forever [--partition-ids N] [--journal-days N]`, `opstate
 * retention show [--json]` and `opstate retention prune [--json]`: the retention policy of the
 * transition history, the step journal and the failure breadcrumbs, kept in the database. The
 * control plane's leader applies it every `historyIntervalMs`, dropping whole partitions of the
 * history, and whole spans of the journal, that are older than the policy keeps and hold no live
 * operation's rows; `prune` does the same now. Operations, lineage, re-plans, archive records and
 * deletion records are never pruned. A keep under a day, a width that is not a whole number of at
 * least 1,000 ids, or a span that is not 1 to 3,660 whole days, is refused and changes nothing.
 *
 * @example
 * ```ts
 * await createRetentionCommand(() => Promise.resolve(database)).run(['set', '--keep', '400d'], io);
 * ```
 */
export function createRetentionCommand(open: DatabaseOpener = databaseFromEnv): Command {
  return defineCommand('retention', SUMMARY, (program, ctx) => {
    const withRetention = async <T>(fn: (r: ReturnType<typeof repositories>) => Promise<T>) => {
      const database = await open({ io: ctx.io });
      try {
        return await fn(repositories(database));
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
        keepOption,
      )
      .option(
        '--partition-ids <n>',
        `how many ids each partition made from now on spans (at least ${MIN_PARTITION_IDS}; default 5,000,000)`,
        wholeNumber(MIN_PARTITION_IDS),
      )
      .option(
        '--journal-days <n>',
        `how many days of operations created each span of the step journal and failure breadcrumbs made from now on holds (1 to ${MAX_JOURNAL_DAYS}; default 30)`,
        wholeNumber(1),
      )
      .option('--by <name>', 'who sets it, as `opstate retention show` prints (default operator)')
      .option('--json', 'print the policy as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            keep: Keep;
            partitionIds?: number;
            journalDays?: number;
            by?: string;
            json?: boolean;
          }>(cmd);
          const policy = await withRetention((r) =>
            r.history.set({
              keepMs: o.keep.ms,
              ...(o.partitionIds === undefined ? {} : { partitionIds: o.partitionIds }),
              ...(o.journalDays === undefined ? {} : { journalDays: o.journalDays }),
              ...(o.by === undefined ? {} : { by: o.by }),
            }),
          );
          ctx.io.out(o.json === true ? JSON.stringify(policy) : policyLine(policy));
          return 0;
        }),
      );
    retention
      .command('show')
      .description(
        'The policy, the partitions of the history and spans of the journal, and any rows outside them',
      )
      .option(
        '--json',
        'print {"policy","partitions","spilled","journal","journalSpilled"} as one JSON object',
      )
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const shown = await withRetention(async (r) => ({
            policy: await r.history.policy(),
            partitions: await r.history.partitions(),
            spilled: await r.history.spilled(),
            journal: await r.journal.spans(),
            journalSpilled: await r.journal.spilled(),
          }));
          if (json === true) {
            ctx.io.out(JSON.stringify(shown));
            return 0;
          }
          printShown(shown, ctx.io);
          return 0;
        }),
      );
    retention
      .command('prune')
      .description('Drop now what the policy lets go, as the leader does every pass')
      .option('--json', 'print {"dropped","kept","journal":{"dropped","kept"}} as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const { json } = optionsOf<{ json?: boolean }>(cmd);
          const result = await withRetention(async (r) => ({
            ...(await r.history.prune()),
            journal: await r.journal.prune(),
          }));
          if (json === true) ctx.io.out(JSON.stringify(result));
          else printPrune(result, ctx.io);
          return 0;
        }),
      );
  });
}

export const retentionCommand: Command = createRetentionCommand();
