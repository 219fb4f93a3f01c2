import { Option } from 'commander';
import { ARTIFACT_TYPES, type ArtifactType } from '../../persistence/ArtifactType.ts';
import { type Command, defineCommand, optionsOf, wholeNumber } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { withArtifacts } from '../withArtifacts.ts';

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
export function createCopyCommand(open: DatabaseOpener = databaseFromEnv): Command {
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
          const { copy, created } = await withArtifacts(
            () => open({ io: ctx.io, creates: true }),
            (a) =>
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

export const copyCommand = createCopyCommand();
