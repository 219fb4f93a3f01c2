import { InvalidArgumentError } from 'commander';
import { isLocationType, type LocationType } from '../../machines/routing.ts';
import {
  type DeletionPolicy,
  DeletionPolicyRepository,
} from '../../persistence/DeletionPolicyRepository.ts';
import { type Command, defineCommand, type Io, optionsOf, wholeNumber } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';

function print(p: DeletionPolicy, io: Io): void {
  io.out('deletion policy (read by every deleter at every pass and before every unlink)');
  io.out(`  cleaned after archive  ${p.cleanLocationTypes.join(', ') || '(none)'}`);
  io.out(`  grace period           ${p.graceSeconds} s after the archive completed`);
  io.out(`  protected prefixes     ${p.protectedPrefixes.join(', ') || '(none)'}`);
  io.out(`  interruptions cap      ${p.maxFailures}`);
  io.out(`  changed                ${p.updatedAt.toISOString()} by ${p.updatedBy}`);
}

/**
 * `opstate policy [--json]` shows the deletion policy; `opstate policy set [--clean TYPES]
 * [--grace SECONDS] [--protect PREFIX]… [--unprotect PREFIX]… [--max-failures N]` changes it. The
 * policy lives in the database (`deletion_policy`), so a change reaches every deleter at its next
 * member, including deletions planned before it.
 *
 * @example
 * ```ts
 * await createPolicyCommand(() => Promise.resolve(database)).run(['set', '--protect', '/data/keep'], io);
 * ```
 */
export function createPolicyCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary =
    'Show or change the deletion policy (what is cleaned after archive, what is protected)';
  const collect = (value: string, previous: string[] = []) => [...previous, value];
  const locationTypes = (value: string): LocationType[] => {
    const types = value
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t !== '');
    for (const t of types) {
      if (!isLocationType(t)) throw new InvalidArgumentError(`'${t}' is not a location type`);
    }
    return types as LocationType[];
  };
  return defineCommand('policy', summary, (program, ctx) => {
    const show = async (
      json: boolean,
      change?: (p: DeletionPolicyRepository) => Promise<DeletionPolicy>,
    ) => {
      // Setting the policy is setup and may create the embedded database; showing it only reads.
      const database = await open({ io: ctx.io, creates: change !== undefined });
      try {
        const policies = new DeletionPolicyRepository(database);
        const policy = change === undefined ? await policies.get() : await change(policies);
        if (json) ctx.io.out(JSON.stringify(policy));
        else print(policy, ctx.io);
        return 0;
      } finally {
        await database.close();
      }
    };
    const policy = program
      .command('policy')
      .description(summary)
      .option('--json', 'print the policy as one JSON object')
      .action(ctx.action(async (cmd) => show(optionsOf<{ json?: boolean }>(cmd).json === true)));
    policy
      .command('set')
      .description('Change the policy; what is not given stays as it is')
      .option(
        '--clean <types>',
        'location types cleaned after archive, e.g. buffer,processing',
        locationTypes,
      )
      .option('--grace <seconds>', 'wait this long after the archive completed', wholeNumber(0))
      .option('--protect <prefix>', 'never delete under this path prefix (repeatable)', collect)
      .option('--unprotect <prefix>', 'drop a protected prefix (repeatable)', collect)
      .option(
        '--max-failures <n>',
        'interruptions before a deletion is DELETION_FAILED',
        wholeNumber(0),
      )
      .option('--json', 'print the policy as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            clean?: LocationType[];
            grace?: number;
            protect?: string[];
            unprotect?: string[];
            maxFailures?: number;
            json?: boolean;
          }>(cmd);
          return show(o.json === true, async (policies) => {
            const current = await policies.get();
            const drop = new Set(o.unprotect ?? []);
            const prefixes = [...current.protectedPrefixes, ...(o.protect ?? [])].filter(
              (p, i, all) => !drop.has(p) && all.indexOf(p) === i,
            );
            return policies.set(
              {
                ...(o.clean === undefined ? {} : { cleanLocationTypes: o.clean }),
                ...(o.grace === undefined ? {} : { graceSeconds: o.grace }),
                ...(o.maxFailures === undefined ? {} : { maxFailures: o.maxFailures }),
                protectedPrefixes: prefixes,
              },
              'operator',
            );
          });
        }),
      );
  });
}

export const policyCommand: Command = createPolicyCommand();
