import { prepareBuiltProcesses } from './helpers/opstateCli.ts';

/**
 * Before any test: the processes tests start run the built package, so `dist/` is rebuilt when a
 * source changed since the last build, and the fixture handlers modules are compiled against it.
 */
export default async function setup(): Promise<void> {
  await prepareBuiltProcesses((line) => process.stdout.write(`${line}\n`));
}
