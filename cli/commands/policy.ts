import { isLocationType, type LocationType } from '../../machines/routing.ts';
import {
  type DeletionPolicy,
  DeletionPolicyRepository,
} from '../../persistence/DeletionPolicyRepository.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { type Command, type Io, parseFlags, UsageError } from '../Command.ts';

function print(p: DeletionPolicy, io: Io): void {
  io.out('deletion policy (read by every deleter at every pass and before every unlink)');
  io.out(`  cleaned after archive  ${p.cleanLocationTypes.join(', ') || '(none)'}`);
  io.out(`  grace period           ${p.graceSeconds} s after the archive completed`);
  io.out(`  protected prefixes     ${p.protectedPrefixes.join(', ') || '(none)'}`);
  io.out(`  interruptions cap      ${p.maxFailures}`);
  io.out(`  changed                ${p.updatedAt.toISOString()} by ${p.updatedBy}`);
}

function whole(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`${flag} must be a whole number ≥ 0`);
  return n;
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
export function createPolicyCommand(open: () => Promise<Database> = () => openDatabase()): Command {
  return {
    name: 'policy',
    summary:
      'Show or change the deletion policy (what is cleaned after archive, what is protected)',
    usage:
      'opstate policy [--json] | opstate policy set [--clean buffer,processing] [--grace SECONDS] [--protect PREFIX]... [--unprotect PREFIX]... [--max-failures N]',
    async run(args, io) {
      const { values, positionals } = parseFlags(args, {
        json: { type: 'boolean' },
        clean: { type: 'string' },
        grace: { type: 'string' },
        protect: { type: 'string', multiple: true },
        unprotect: { type: 'string', multiple: true },
        'max-failures': { type: 'string' },
      });
      const [action, extra] = positionals;
      if (action !== undefined && action !== 'set') {
        throw new UsageError(`unknown action '${action}'; use set, or nothing to show`);
      }
      if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
      const database = await open();
      try {
        const policies = new DeletionPolicyRepository(database);
        let policy = await policies.get();
        if (action === 'set') {
          const clean =
            values.clean === undefined
              ? undefined
              : values.clean
                  .split(',')
                  .map((t) => t.trim())
                  .filter((t) => t !== '');
          for (const t of clean ?? []) {
            if (!isLocationType(t)) throw new UsageError(`'${t}' is not a location type`);
          }
          const drop = new Set(values.unprotect ?? []);
          const prefixes = [...policy.protectedPrefixes, ...(values.protect ?? [])].filter(
            (p, i, all) => !drop.has(p) && all.indexOf(p) === i,
          );
          const grace = whole('--grace', values.grace);
          const max = whole('--max-failures', values['max-failures']);
          policy = await policies.set(
            {
              ...(clean === undefined ? {} : { cleanLocationTypes: clean as LocationType[] }),
              ...(grace === undefined ? {} : { graceSeconds: grace }),
              ...(max === undefined ? {} : { maxFailures: max }),
              protectedPrefixes: prefixes,
            },
            'operator',
          );
        }
        if (values.json === true) io.out(JSON.stringify(policy));
        else print(policy, io);
        return 0;
      } finally {
        await database.close();
      }
    },
  };
}

export const policyCommand: Command = createPolicyCommand();
