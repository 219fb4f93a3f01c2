import { OPERATOR } from '../../machines/actors.ts';
import { systemClock } from '../../machines/Clock.ts';
import { releaseClaim, stageFor } from '../../runtime/stagingOnRequest.ts';
import { argumentsOf, type Command, defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { cliOperator, cliOperatorName } from './operatorCommands.ts';

const OPERATOR_HELP =
  'who to record it as by (default: OPSTATE_OPERATOR, else the user running this)';

/**
 * `opstate stage <package-id> --to <location> [--operator NAME] [--json]`: stages a raw data
 * package on request. In one transaction it creates an active operation group, whose retention
 * claim holds the verified archive copy staged from (and, later, the staged copy), and the STAGING
 * operation (PENDING) into the processing location, recorded as by `operator:<name>` (the name
 * `cliOperatorName` finds).
 * Written to the database alone: the control plane schedules it. An unknown package or location
 * exits 1 (`NOT_FOUND`); a location that is not a processing location, or a package with no
 * verified archive copy, exits 2; nothing is created then.
 *
 * @example
 * ```ts
 * await createStageCommand(open).run([packageId, '--to', 'cologne/processing', '--json'], io);
 * ```
 */
export function createStageCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary =
    'Stage a package from its archive into a processing location, holding a retention claim';
  return defineCommand('stage', summary, (program, ctx) => {
    program
      .command('stage')
      .description(summary)
      .argument('<package-id>', 'the raw data package')
      .requiredOption('--to <location>', 'the processing location: its id or site/name')
      .option('--operator <name>', OPERATOR_HELP)
      .option('--json', 'print the staging as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const [pkg] = argumentsOf(cmd) as [string];
          const o = optionsOf<{ to: string; operator?: string; json?: boolean }>(cmd);
          const by = `${OPERATOR}:${cliOperatorName(o.operator)}`;
          const database = await open({ io: ctx.io });
          try {
            const s = await stageFor(
              { database, clock: systemClock, wake: () => undefined },
              { package: pkg, to: o.to },
              by,
            );
            ctx.io.out(
              o.json === true
                ? JSON.stringify({ ...s, status: 'PENDING', by })
                : `staging ${s.operationId} (PENDING): ${s.package} from ${s.from.location} (copy ${s.from.copyId}) to ${s.to.location}\n` +
                    `retention claim held by group ${s.groupId}; release it with opstate release ${s.groupId}`,
            );
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

/**
 * `opstate release <group-id> [--operator NAME] [--json]`: releases a staging's retention claim,
 * recorded as by the operator; what it held may be deleted by the policy again. An unknown group
 * exits 1 (`NOT_FOUND`), one already released exits 2; either changes nothing.
 *
 * @example
 * ```ts
 * await createReleaseCommand(open).run([groupId], io);
 * ```
 */
export function createReleaseCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary = "Release a staging's retention claim (its operation group)";
  return defineCommand('release', summary, (program, ctx) => {
    program
      .command('release')
      .description(summary)
      .argument('<group-id>', 'the operation group opstate stage printed')
      .option('--operator <name>', OPERATOR_HELP)
      .option('--json', 'print the outcome as one JSON object')
      .action(
        ctx.action(async (cmd) => {
          const [groupId] = argumentsOf(cmd) as [string];
          const o = optionsOf<{ operator?: string; json?: boolean }>(cmd);
          const database = await open({ io: ctx.io });
          try {
            const r = await releaseClaim(database, groupId, cliOperator(o.operator));
            ctx.io.out(
              o.json === true
                ? JSON.stringify(r)
                : `group ${r.groupId} released by ${r.releasedBy}: its retention claim is gone`,
            );
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const stageCommand = createStageCommand();
export const releaseCommand = createReleaseCommand();
