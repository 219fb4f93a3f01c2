import { OPERATOR } from '../../machines/actors.ts';
import { ARTIFACT_TYPES, type ArtifactType } from '../../persistence/ArtifactType.ts';
import { type Command, defineCommand, optionsOf, wholeNumber } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { withArtifacts } from '../withArtifacts.ts';
import { cliOperatorName } from './operatorCommands.ts';

/**
 * `opstate artifact add <type> --name N [--package ID] [--checksum C] [--size BYTES] [--json]`, and
 * `opstate artifact files-complete <package> --location ID [--operator NAME] [--json]`.
 *
 * @example
 * ```ts
 * await createArtifactCommand(open).run(['add', 'raw_data_package', '--name', 'obs-1'], io);
 * ```
 */
export function createArtifactCommand(open: DatabaseOpener = databaseFromEnv): Command {
  const summary =
    'Register an artifact: a raw data file, raw data package or data transfer package';
  return defineCommand('artifact', summary, (program, ctx) => {
    const artifact = program.command('artifact').description(summary);
    artifact
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
          const id = await withArtifacts(
            () => open({ io: ctx.io, creates: true }),
            (a) => {
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
            },
          );
          ctx.io.out(
            o.json === true
              ? JSON.stringify({ id, type, ...common, package: o.package ?? null })
              : id,
          );
          return 0;
        }),
      );
    artifact
      .command('files-complete')
      .description(
        "Declare a raw data package's files all registered, each with a PRESENT copy at the location: a declared pipeline's packaging there is then created by the control plane, once",
      )
      .argument('<package>', "the raw data package's id")
      .requiredOption(
        '--location <id>',
        'where its files are, as `opstate location add` printed it',
      )
      .option(
        '--operator <name>',
        'who to record it as by (default: OPSTATE_OPERATOR, else the user running this)',
      )
      .option('--json', 'print {"rawDataPackageId", "locationId", "declared", "files", "by"}')
      .action(
        ctx.action(async (cmd) => {
          const [pkg] = cmd.processedArgs as [string];
          const o = optionsOf<{ location: string; operator?: string; json?: boolean }>(cmd);
          const by = `${OPERATOR}:${cliOperatorName(o.operator)}`;
          const r = await withArtifacts(
            () => open({ io: ctx.io }),
            (a) => a.declareFilesComplete({ rawDataPackageId: pkg, locationId: o.location, by }),
          );
          ctx.io.out(
            o.json === true
              ? JSON.stringify({ rawDataPackageId: pkg, locationId: o.location, ...r, by })
              : r.declared
                ? `declared the ${r.files} files of ${pkg} complete at ${o.location}, by ${by}`
                : `the ${r.files} files of ${pkg} were declared complete at ${o.location} already; nothing changed`,
          );
          return 0;
        }),
      );
  });
}

export const artifactCommand = createArtifactCommand();
