import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { CopyLifecycle } from '../../persistence/CopyLifecycle.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { runCliInProcess, spawnCli } from '../helpers/runCli.ts';
import { archivedPackage } from '../persistence/copyFixtures.ts';
import { completedOperation, makeWorld, tableCounts, type World } from '../persistence/fixtures.ts';

/**
 * `opstate rollback` as an operator types it, on the real Postgres: a one-stage pipeline module
 * (archive from the buffer into the long-term archive) over a package whose archive completed. The
 * plan it prints, `--dry-run` changing nothing, who the database records, and the exit codes (0; 1
 * for an unknown package; 2 for an unknown stage, an id that is no uuid, a missing --pipeline).
 */
let testDb: TestDatabase;
let database: Database;
let w: World;
let dir: string;
let module: string;
/** Unpack into the buffer, then archive from it: the buffer copy is the unpack's output. */
let unpacking: string;

/** Writes `<name>.mjs`, a module exporting a pipeline of `stages` over the world's buffer and lta. */
async function pipelineModule(name: string, stages: string): Promise<string> {
  const file = join(dir, `${name}.mjs`);
  const built = pathToFileURL(join(REPO_ROOT, 'dist', 'index.js')).href;
  await writeFile(
    file,
    `import { definePipeline, OperationKind } from '${built}';
export const pipeline = definePipeline({
  name: '${name}',
  locations: {
    buffer: { site: '${w.buffer.site}', name: '${w.buffer.name}' },
    lta: { site: '${w.archive.site}', name: '${w.archive.name}' },
  },
  stages: ${stages},
});
`,
  );
  return file;
}

beforeAll(async () => {
  testDb = await createTestDatabase(undefined, { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  w = await makeWorld(database);
  dir = await mkdtemp(join(tmpdir(), 'opstate-rollback-cli-'));
  module = await pipelineModule(
    'archiving',
    "{ archive: { kind: OperationKind.LONG_TERM_ARCHIVE, from: 'buffer', at: 'lta' } }",
  );
  unpacking = await pipelineModule(
    'unpacking',
    `{
    unpack: { kind: OperationKind.UNPACK, at: 'buffer' },
    archive: { kind: OperationKind.LONG_TERM_ARCHIVE, after: 'unpack', from: 'buffer', at: 'lta' },
  }`,
  );
});
afterAll(async () => {
  await database?.close();
  if (testDb !== undefined) await dropTestDatabase(testDb);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const env = () => ({ DATABASE_URL: testDb.url, OPSTATE_OPERATOR: 'alice' });

/** `opstate <args>` spawned as a user runs it. */
const spawned = (args: string[]) => spawnCli(args, env());

/** `opstate <args>` in this process (the same `main`), with the environment set for the call. */
const inProcess = (args: string[]) => runCliInProcess(args, env());

async function rows() {
  const [r] = await database.execute(`select
    (select count(*) from pipeline_rollback)::int as rollbacks,
    (select count(*) from operation where superseded_by is not null)::int as superseded`);
  return { ...(await tableCounts(database)), ...r };
}

describe('opstate rollback', () => {
  it('prints the plan on --dry-run and changes nothing; without it, supersedes the archive and creates it again, recorded as the operator', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const before = await rows();
    const dry = await inProcess([
      'rollback',
      p.pkg,
      '--to',
      'archive',
      '--pipeline',
      module,
      '--dry-run',
    ]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(
      `dry run (nothing changed): rollback of raw_data_package ${p.pkg} to 'archive' (pipeline 'archiving')`,
    );
    expect(dry.stdout).toContain(
      `supersedes ${p.operationId} (COMPLETED); would create one for ${p.pkg} (PENDING)`,
    );
    expect(dry.stdout).toContain(
      `  ${p.archiveCopy?.id} raw_data_package ${p.pkg} at ${w.archive.site}/${w.archive.name} (PRESENT), from archive`,
    );
    expect(dry.stdout).toContain(
      'would be recorded as by operator:alice; run it again without --dry-run',
    );
    expect(await rows()).toEqual(before);

    const r = await spawned(['rollback', p.pkg, '--to', 'archive', '--pipeline', module, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const done = JSON.parse(r.stdout);
    expect(done).toMatchObject({
      dryRun: false,
      pipeline: 'archiving',
      artifact: { type: 'raw_data_package', id: p.pkg },
      stage: 'archive',
      stages: ['archive'],
      by: 'operator:alice',
      redone: [{ stage: 'archive', operationId: p.operationId, status: 'COMPLETED' }],
      superseded: [{ copyId: p.archiveCopy?.id, status: 'PRESENT', stage: 'archive' }],
    });
    const created = done.created[0].operationId as string;
    const op = await inspectOperation(database, created);
    expect(op).toMatchObject({ status: 'PENDING', kind: 'long_term_archive' });
    expect(op.transitions[0]?.by).toBe('operator:alice');
    expect(op.inputs.map((c) => c.id)).toEqual([p.buffer.id]);
    const [marks] = await database.execute(`select
      (select rollback_id::text from operation where id = '${created}') as caused,
      (select superseded_by::text from operation where id = '${p.operationId}') as superseded,
      (select requested_by from pipeline_rollback where id = '${done.rollbackId}') as requested_by`);
    expect(marks).toEqual({
      caused: done.rollbackId,
      superseded: done.rollbackId,
      requested_by: 'operator:alice',
    });
  });

  it('refuses bad input with exit 2, an unknown package with exit 1, a live stage with exit 1; nothing changes', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const before = await rows();
    const unknownStage = await inProcess([
      'rollback',
      p.pkg,
      '--to',
      'transfer',
      '--pipeline',
      module,
    ]);
    expect(unknownStage.code).toBe(2);
    expect(unknownStage.stderr).toContain(
      "pipeline 'archiving' has no stage 'transfer'; its stages: archive [BAD_INPUT]",
    );
    const notUuid = await inProcess(['rollback', 'pkg-1', '--to', 'archive', '--pipeline', module]);
    expect(notUuid.code).toBe(2);
    expect(notUuid.stderr).toContain('must be a raw data package');
    const unknown = await inProcess([
      'rollback',
      '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f',
      '--to',
      'archive',
      '--pipeline',
      module,
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('[NOT_FOUND]');
    const noPipeline = await inProcess(['rollback', p.pkg, '--to', 'archive']);
    expect(noPipeline.code).toBe(2);
    expect(noPipeline.stderr).toContain("required option '--pipeline <module>'");
    const missing = await inProcess([
      'rollback',
      p.pkg,
      '--to',
      'archive',
      '--pipeline',
      join(dir, 'none.mjs'),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('none.mjs does not exist');
    expect(await rows()).toEqual(before);

    // Once rolled back, the new archive is PENDING: a second rollback is refused until it settles.
    expect(
      (await inProcess(['rollback', p.pkg, '--to', 'archive', '--pipeline', module])).code,
    ).toBe(0);
    const settled = await rows();
    const again = await inProcess(['rollback', p.pkg, '--to', 'archive', '--pipeline', module]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/of stage 'archive' is PENDING; .*\[CONFLICT\]/);
    expect(await rows()).toEqual(settled);
  });
  it('refuses with exit 1 (CONFLICT) a rollback whose re-run would produce again a copy being deleted, naming it; nothing changes', async () => {
    const p = await archivedPackage(database, w, 'verified');
    const dtp = await w.artifacts.addDataTransferPackage({ name: `dtp-of-${p.pkg}` });
    await w.artifacts.assignPackages(dtp, [p.pkg]);
    // The unpack that wrote the package's buffer copy (the copy the archive read), COMPLETED.
    await completedOperation(
      new OperationStore(database),
      {
        kind: OperationKind.UNPACK,
        fields: { dataTransferPackageId: dtp, locationId: w.buffer.id },
      },
      [{ artifactType: 'raw_data_package', artifactId: p.pkg, locationId: w.buffer.id }],
    );
    // Its archive verified, the buffer copy's deletion is scheduled, as a deleter does.
    await new CopyLifecycle(database).apply(
      p.buffer.id,
      { type: 'SCHEDULE_DELETION' },
      { by: 'deleter-1', reason: 'archived' },
    );
    const before = await rows();
    const refused = await spawned(['rollback', p.pkg, '--to', 'unpack', '--pipeline', unpacking]);
    expect(refused.code, refused.stdout).toBe(1);
    expect(refused.stderr).toContain(
      `would have 'unpack' produce copy ${p.buffer.id} (raw_data_package ${p.pkg} at ${w.buffer.site}/${w.buffer.name}) again, which is DELETION_SCHEDULED; it is being deleted: wait for the deletion to end, then roll back; nothing was changed [CONFLICT]`,
    );
    expect(await rows()).toEqual(before);
  });
});
