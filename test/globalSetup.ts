import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate } from '../persistence/migrate.ts';
import { openDatabase } from '../persistence/openDatabase.ts';
import { STAND_IN_ARCHIVE_DIR_ENV } from '../stages/archiveStandIn.ts';
import { prepareBuiltProcesses } from './helpers/opstateCli.ts';
import {
  createTemplateDatabase,
  dropTestDatabase,
  TEMPLATE_DATABASE_ENV,
} from './helpers/postgres.ts';

/**
 * Before any test: the processes tests start run the built package, so `dist/` is rebuilt when a
 * source changed since the last build, and the fixture handlers modules are compiled against it.
 * The stand-in archives of the run (`archiveStandIn`, in the tests and in every process they
 * start, which inherit the variable) go to a folder of the run's own, removed when it ends, and
 * the databases tests ask for migrated are copies of one migrated template of the run's own.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await prepareBuiltProcesses((line) => process.stdout.write(`${line}\n`));
  const standIns = await mkdtemp(join(tmpdir(), 'opstate-stand-in-archives-'));
  process.env[STAND_IN_ARCHIVE_DIR_ENV] = standIns;
  // One migrated database of the run's own that the databases asked for migrated are copied from.
  const template = await createTemplateDatabase(async (url) => {
    const database = await openDatabase({ databaseUrl: url });
    try {
      await migrate(database);
    } finally {
      await database.close();
    }
  });
  process.env[TEMPLATE_DATABASE_ENV] = template.name;
  return async () => {
    await rm(standIns, { recursive: true, force: true });
    await dropTestDatabase(template);
  };
}
