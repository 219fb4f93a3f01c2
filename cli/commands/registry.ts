import { InvalidArgumentError, Option } from 'commander';
import { isLocationType, LocationType } from '../../machines/routing.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { ARTIFACT_TYPES, type ArtifactType } from '../../persistence/ArtifactType.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { type Command, defineCommand, optionsOf, wholeNumber } from '../Command.ts';
import { databaseFromEnv } from '../runtimeFromEnv.ts';

/**
 * What the pipeline works on, registered by an operator: locations, artifacts (raw data files,
 * raw data packages, data transfer packages) and their physical copies. Each `add` prints the new
 * id; `--json` prints the record.
 */
type Open = () => Promise<Database>;

async function withArtifacts<T>(open: Open, fn: (a: ArtifactRepository) => Promise<T>) {
  const database = await open();
  try {
    return await fn(new ArtifactRepository(database));
  } finally {
    await database.close();
  }
}

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
export function createLocationCommand(open: Open = databaseFromEnv): Command {
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
          const location = await withArtifacts(open, (a) =>
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

/**
 * `opstate artifact add <type> --name N [--package ID] [--checksum C] [--size BYTES] [--json]`.
 *
 * @example
 * ```ts
 * await createArtifactCommand(open).run(['add', 'raw_data_package', '--name', 'obs-1'], io);
 * ```
 */
export function createArtifactCommand(open: Open = databaseFromEnv): Command {
  const summary =
    'Register an artifact: a raw data file, raw data package or data transfer package';
  return defineCommand('artifact', summary, (program, ctx) => {
    program
      .command('artifact')
      .description(summary)
      .command('add')
      .description('Register an artifact; prints its id')
      .addArgument(
        program.createArgument('<type>', 'what it is').choices(ARTIFACT_TYPES as string[]),
      )
      .requiredOption('--name <name>', 'its name')
      .option(
        '--package <id>',
        'the package it belongs to: a raw data file’s raw data package, a raw data package’s data transfer package',
      )
      .option('--checksum <checksum>', 'e.g. sha256:…')
      .option('--size <bytes>', 'its size in bytes', wholeNumber(0))
      .option('--json', 'print {"id", "type", "name", …}')
      .action(
        ctx.action(async (cmd) => {
          const [type] = cmd.processedArgs as [ArtifactType];
          const o = optionsOf<{
            name: string;
            package?: string;
            checksum?: string;
            size?: number;
            json?: boolean;
          }>(cmd);
          const common = {
            name: o.name,
            ...(o.checksum === undefined ? {} : { checksum: o.checksum }),
            ...(o.size === undefined ? {} : { size: o.size }),
          };
          const id = await withArtifacts(open, (a) => {
            switch (type) {
              case 'raw_data_file':
                return a.addRawDataFile({
                  ...common,
                  ...(o.package === undefined ? {} : { rawDataPackageId: o.package }),
                });
              case 'raw_data_package':
                return a.addRawDataPackage({
                  ...common,
                  ...(o.package === undefined ? {} : { dataTransferPackageId: o.package }),
                });
              case 'data_transfer_package':
                return a.addDataTransferPackage(common);
            }
          });
          ctx.io.out(
            o.json === true
              ? JSON.stringify({ id, type, ...common, package: o.package ?? null })
              : id,
          );
          return 0;
        }),
      );
  });
}

/**
 * `opstate copy add --artifact-type T --artifact ID --location ID [--path P] [--checksum C]
 * [--size BYTES] [--json]`: a physical copy of an artifact at a location. A live copy already
 * there is not duplicated: its id is printed (and `"created": false` in JSON).
 *
 * @example
 * ```ts
 * await createCopyCommand(open).run(['add', '--artifact-type', 'raw_data_package',
 *   '--artifact', pkg, '--location', source], io);
 * ```
 */
export function createCopyCommand(open: Open = databaseFromEnv): Command {
  const summary = 'Register a physical copy of an artifact at a location';
  return defineCommand('copy', summary, (program, ctx) => {
    program
      .command('copy')
      .description(summary)
      .command('add')
      .description('Register a copy; prints its id')
      .addOption(
        new Option('--artifact-type <type>', 'what it is a copy of')
          .choices(ARTIFACT_TYPES as string[])
          .makeOptionMandatory(),
      )
      .requiredOption('--artifact <id>', 'the artifact, as `opstate artifact add` printed it')
      .requiredOption('--location <id>', 'the location, as `opstate location add` printed it')
      .option('--path <path>', 'where it is under the location')
      .option('--checksum <checksum>', 'e.g. sha256:…')
      .option('--size <bytes>', 'its size in bytes', wholeNumber(0))
      .option('--json', 'print the copy record and whether it was created')
      .action(
        ctx.action(async (cmd) => {
          const o = optionsOf<{
            artifactType: ArtifactType;
            artifact: string;
            location: string;
            path?: string;
            checksum?: string;
            size?: number;
            json?: boolean;
          }>(cmd);
          const { copy, created } = await withArtifacts(open, (a) =>
            a.addCopy({
              artifactType: o.artifactType,
              artifactId: o.artifact,
              locationId: o.location,
              ...(o.path === undefined ? {} : { path: o.path }),
              ...(o.checksum === undefined ? {} : { checksum: o.checksum }),
              ...(o.size === undefined ? {} : { size: o.size }),
            }),
          );
          ctx.io.out(o.json === true ? JSON.stringify({ ...copy, created }) : copy.id);
          return 0;
        }),
      );
  });
}

export const locationCommand = createLocationCommand();
export const artifactCommand = createArtifactCommand();
export const copyCommand = createCopyCommand();
