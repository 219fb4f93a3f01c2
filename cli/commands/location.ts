import { InvalidArgumentError } from 'commander';
import { isLocationType, LocationType } from '../../machines/routing.ts';
import { type Command, defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { withArtifacts } from '../withArtifacts.ts';

const locationType = (value: string) => {
  if (!isLocationType(value)) {
    throw new InvalidArgumentError(`use one of ${Object.values(LocationType).join(', ')}`);
  }
  return value;
};

/**
 * `opstate location add --site S --name N --type T --root PATH [--json]`.
 *
 * @example
 * ```ts
 * await createLocationCommand(open).run(['add', '--site', 'cologne', '--name', 'lta',
 *   '--type', 'long_term_archive', '--root', '/srv/lta'], io);
 * ```
 */
export function createLocationCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary = 'Register a location (a site, a name, a type and its storage root)';
  return defineCommand('location', summary, (program, ctx) => {
    program
      .command('location')
      .description(summary)
      .command('add')
      .description('Register a location; prints its id')
      .requiredOption('--site <site>', 'the site, e.g. cologne')
      .requiredOption('--name <name>', 'the name, unique at its site')
      .requiredOption(
        '--type <type>',
        `the location type: ${Object.values(LocationType).join(', ')}`,
        locationType,
      )
      .requiredOption('--root <path>', 'its storage root (a folder, or a URL for the store)')
      .option('--json', 'print the location record')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            site: string;
            name: string;
            type: LocationType;
            root: string;
            json?: boolean;
          }>(cmd);
          const location = await withArtifacts(
            () => open({ io: ctx.io, creates: true }),
            (a) =>
              a.addLocation({
                site: o.site,
                name: o.name,
                locationType: o.type,
                storageRoot: o.root,
              }),
          );
          ctx.io.out(o.json === true ? JSON.stringify(location) : location.id);
          return 0;
        }),
      );
  });
}

export const locationCommand = createLocationCommand();
