import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pipelinePass } from '../../control-plane/pipelineLoop.ts';
import { AttentionCategory } from '../../machines/attention.ts';
import { systemClock } from '../../machines/Clock.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultPipeline, type Pipeline } from '../../machines/pipeline.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { loadAttention } from '../../persistence/loadAttention.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { registerSampleData, type SampleData } from '../../stages/sampleData.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { runCliInProcess } from '../helpers/runCli.ts';

/**
 * The entry stage on the real Postgres: a raw data package whose files are declared complete at
 * the source gets its packaging from the pipeline's pass, exactly once, reading its files' copies
 * there; a packaging submitted before is adopted, not doubled; bad declarations change nothing.
 */
let testDb: TestDatabase;
let database: Database;
let artifacts: ArtifactRepository;
let dir: string;

beforeAll(async () => {
  testDb = await createTestDatabase('opstate_pipeline_entry', { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url });
  await migrate(database);
  artifacts = new ArtifactRepository(database);
  dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-entry-'));
});
afterAll(async () => {
  await database?.close();
  if (testDb !== undefined) await dropTestDatabase(testDb);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

/** A sample of `packageCount` packages at a site of its own, and the default pipeline over it. */
async function world(packageCount: number): Promise<{ sample: SampleData; pipeline: Pipeline }> {
  const site = `entry-${randomUUID().slice(0, 8)}`;
  const sample = await registerSampleData(artifacts, join(dir, site), {
    site,
    packageCount,
    namePrefix: `${site}-`,
  });
  const pipeline = defaultPipeline(
    {
      source: { site, name: 'source' },
      destinations: [{ buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } }],
    },
    `p-${site}`,
  );
  return { sample, pipeline };
}

function passOf(
  pipeline: Pipeline,
  faults?: Parameters<typeof pipelinePass>[0]['faults'],
  batchSize = 64,
) {
  return pipelinePass({
    database,
    pipeline,
    clock: systemClock,
    logger: memoryLogger(),
    batchSize,
    fence: () => undefined,
    onCreated: () => {},
    faults,
  });
}

/** Every packaging of the sample's packages: its id, inputs, creator and status. */
async function packagings(sample: SampleData) {
  const ids = sample.packages.map((p) => `'${p.id}'`).join(',');
  return database.execute(`select o.id::text, p.raw_data_package_id::text as pkg,
      (select t.by from operation_transition t where t.operation_id = o.id order by t.id limit 1)
        as created_by, o.status, o.pipeline_subject_id::text as subject,
      array(select i.physical_copy_id::text from operation_input i where i.operation_id = o.id
        order by i.physical_copy_id) as inputs
    from packaging_operation p join operation o on o.id = p.operation_id
    where p.raw_data_package_id in (${ids}) order by p.raw_data_package_id`);
}

const facts = (pkg: string) =>
  database.execute(`select location_id::text, declared_by, packaging_operation_id::text as op
    from package_files_complete where raw_data_package_id = '${pkg}'`);

async function refusal(p: Promise<unknown>): Promise<OpstateError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  return err as OpstateError;
}

describe('the entry stage, from a "files complete" fact', () => {
  it('creates each declared package its packaging once, reading its files at the source; the next pass creates nothing', async () => {
    const { sample, pipeline } = await world(3);
    const [first, second, undeclared] = sample.packages;
    if (first === undefined || second === undefined || undeclared === undefined) throw new Error();
    const source = sample.locations.source.id;
    for (const p of [first, second]) {
      expect(
        await artifacts.declareFilesComplete({
          rawDataPackageId: p.id,
          locationId: source,
          by: 'scanner',
        }),
      ).toEqual({ declared: true, files: 3 });
    }
    // Declared again at the same location: nothing new.
    expect(
      await artifacts.declareFilesComplete({ rawDataPackageId: first.id, locationId: source }),
    ).toEqual({ declared: false, files: 3 });

    const pass = passOf(pipeline);
    await pass();
    const made = await packagings(sample);
    expect(made.map((m) => m.pkg)).toEqual([first.id, second.id].sort());
    for (const m of made) {
      const p = sample.packages.find((x) => x.id === m.pkg);
      expect(m.inputs).toEqual([...(p?.fileCopyIds ?? [])].sort());
      expect(m).toMatchObject({
        created_by: `pipeline:${pipeline.name}`,
        status: 'PENDING',
        subject: m.pkg,
      });
      expect(await facts(String(m.pkg))).toEqual([
        { location_id: source, declared_by: 'scanner', op: m.id },
      ]);
    }

    // Nothing is due any more: passes create nothing, a new fresh pass (a new leader) neither.
    await pass();
    await passOf(pipeline)();
    expect((await packagings(sample)).map((m) => m.id)).toEqual(made.map((m) => m.id));
  });

  it('adopts a packaging submitted before the declaration instead of creating a second', async () => {
    const { sample, pipeline } = await world(1);
    const [p] = sample.packages;
    if (p === undefined) throw new Error();
    const submitted = await new OperationStore(database).create({
      kind: OperationKind.RAW_DATA_PACKAGE,
      fields: { rawDataPackageId: p.id, locationId: sample.locations.source.id },
      inputs: [...p.fileCopyIds],
    });
    await artifacts.declareFilesComplete({
      rawDataPackageId: p.id,
      locationId: sample.locations.source.id,
    });
    await passOf(pipeline)();
    expect((await packagings(sample)).map((m) => m.id)).toEqual([submitted]);
    expect((await facts(p.id))[0]?.op).toBe(submitted);
  });

  it('two passes racing create it once; a pass that dies before its write leaves it for the next', async () => {
    const { sample, pipeline } = await world(4);
    for (const p of sample.packages) {
      await artifacts.declareFilesComplete({
        rawDataPackageId: p.id,
        locationId: sample.locations.source.id,
      });
    }
    const dying = passOf(pipeline, {
      beforeWrite: () => {
        throw new Error('killed before its write');
      },
    });
    await expect(dying()).rejects.toThrow('killed before its write');
    expect(await packagings(sample)).toEqual([]);

    const outcomes = await Promise.allSettled([passOf(pipeline)(), passOf(pipeline)()]);
    // The loser, if the two overlapped, is refused by the live key or the consumed fact.
    for (const o of outcomes) {
      if (o.status === 'rejected') {
        expect((o.reason as OpstateError).code).toBe(OpstateErrorCode.CONFLICT);
      }
    }
    await passOf(pipeline)();
    const made = await packagings(sample);
    expect(made.map((m) => m.pkg)).toEqual(sample.packages.map((p) => p.id).sort());
    for (const m of made) expect((await facts(String(m.pkg)))[0]?.op).toBe(m.id);
  });

  it('a package whose file lost its copy after the declaration waits, holding back none declared after it, and goes on once the copy is back', async () => {
    const { sample, pipeline } = await world(2);
    const [older, newer] = sample.packages;
    if (older === undefined || newer === undefined) throw new Error();
    const source = sample.locations.source.id;
    for (const p of [older, newer]) {
      await artifacts.declareFilesComplete({ rawDataPackageId: p.id, locationId: source });
    }
    const lost = older.fileCopyIds[0] as string;
    await database.execute(`update physical_copy set status = 'DELETED' where id = '${lost}'`);
    // It is on the attention list, naming the file; the other is not.
    const waiting = async () =>
      (
        await loadAttention(database, {
          now: Date.now(),
          timing: {
            heartbeatTimeoutMs: 60_000,
            reconcilerFloorMs: 3_600_000,
            deadlines: DEFAULT_DEADLINES_MS,
          },
          heartbeats: null,
          category: AttentionCategory.ENTRY_WAITING,
        })
      ).sections[0];
    const listed = await waiting();
    expect(listed?.items.map((i) => i.subject)).toEqual([{ type: 'package', id: older.id }]);
    expect(listed?.total).toBe(1);
    expect(listed?.items[0]?.why).toMatch(
      new RegExp(
        `^raw data package ${older.name}'s files were declared complete at \\S+/source, but file scan_0001\\.fits \\(\\S+\\) has no PRESENT copy there any more`,
      ),
    );
    // One fact per pass: the waiting one, oldest, does not take the page.
    const pass = passOf(pipeline, undefined, 1);
    await pass();
    await pass();
    expect((await packagings(sample)).map((m) => m.pkg)).toEqual([newer.id]);
    expect((await facts(older.id))[0]?.op).toBeNull();

    const [file] = await database.execute(
      `select artifact_id::text as id from physical_copy where id = '${lost}'`,
    );
    const { copy } = await artifacts.addCopy({
      artifactType: 'raw_data_file',
      artifactId: String(file?.id),
      locationId: source,
    });
    await pass();
    const made = await packagings(sample);
    expect(made.map((m) => m.pkg).sort()).toEqual([older.id, newer.id].sort());
    expect((await waiting())?.total).toBe(0);
    expect(made.find((m) => m.pkg === older.id)?.inputs).toEqual(
      [copy.id, ...older.fileCopyIds.slice(1)].sort(),
    );
  });

  it('refuses a declaration that is not true, changing nothing', async () => {
    const { sample } = await world(1);
    const [p] = sample.packages;
    if (p === undefined) throw new Error();
    const { source, buffer } = sample.locations;

    const unknown = await refusal(
      artifacts.declareFilesComplete({ rawDataPackageId: randomUUID(), locationId: source.id }),
    );
    expect(unknown.code).toBe(OpstateErrorCode.NOT_FOUND);
    expect(unknown.message).toMatch(/^no raw data package .* is registered$/);
    const nowhere = await refusal(
      artifacts.declareFilesComplete({ rawDataPackageId: p.id, locationId: randomUUID() }),
    );
    expect(nowhere.code).toBe(OpstateErrorCode.NOT_FOUND);
    expect(nowhere.message).toMatch(/^no location .* is registered$/);
    const notUuid = await refusal(
      artifacts.declareFilesComplete({ rawDataPackageId: 'pkg-1', locationId: source.id }),
    );
    expect(notUuid.code).toBe(OpstateErrorCode.BAD_INPUT);

    const empty = await artifacts.addRawDataPackage({ name: `empty-${randomUUID()}` });
    const noFiles = await refusal(
      artifacts.declareFilesComplete({ rawDataPackageId: empty, locationId: source.id }),
    );
    expect(noFiles.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(noFiles.message).toContain('has no files; assign its files');

    // Its files are at the source, not in the buffer.
    const elsewhere = await refusal(
      artifacts.declareFilesComplete({ rawDataPackageId: p.id, locationId: buffer.id }),
    );
    expect(elsewhere.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(elsewhere.message).toMatch(
      new RegExp(
        `file scan_0001\\.fits \\(\\S+\\) of raw data package ${p.name} has no PRESENT copy at ${buffer.site}/buffer`,
      ),
    );
    expect(await facts(p.id)).toEqual([]);
    expect(await facts(empty)).toEqual([]);

    await artifacts.declareFilesComplete({ rawDataPackageId: p.id, locationId: source.id });
    // Once every file has a copy in the buffer too, a declaration there is a conflict.
    const files = await database.execute(
      `select id::text from raw_data_file where raw_data_package_id = '${p.id}'`,
    );
    for (const f of files) {
      await artifacts.addCopy({
        artifactType: 'raw_data_file',
        artifactId: String(f.id),
        locationId: buffer.id,
      });
    }
    const moved = await refusal(
      artifacts.declareFilesComplete({ rawDataPackageId: p.id, locationId: buffer.id }),
    );
    expect(moved.code).toBe(OpstateErrorCode.CONFLICT);
    expect(moved.message).toContain('were declared complete at location');
    expect(await facts(p.id)).toEqual([
      { location_id: source.id, declared_by: 'operator', op: null },
    ]);
  });
});

describe('opstate artifact files-complete', () => {
  it('declares a package registered through the CLI, once; a package without its files there is exit 2, an unknown one exit 1', async () => {
    const env = { DATABASE_URL: testDb.url, OPSTATE_OPERATOR: 'bob' };
    const cli = async (args: string[]) => {
      const r = await runCliInProcess(args, env);
      return { ...r, stdout: r.stdout.trim() };
    };
    const site = `cli-${randomUUID().slice(0, 8)}`;
    const location = (
      await cli([
        'location',
        'add',
        '--site',
        site,
        '--name',
        'src',
        '--type',
        'source',
        '--root',
        '/s',
      ])
    ).stdout;
    const pkg = (await cli(['artifact', 'add', 'raw_data_package', '--name', `${site}-obs`]))
      .stdout;
    const file = (
      await cli(['artifact', 'add', 'raw_data_file', '--name', 'scan_1.fits', '--package', pkg])
    ).stdout;
    const declare = ['artifact', 'files-complete', pkg, '--location', location, '--json'];

    const early = await cli(declare);
    expect(early.code).toBe(2);
    expect(early.stderr).toContain(`file scan_1.fits (${file}) of raw data package ${site}-obs`);
    expect(await facts(pkg)).toEqual([]);

    const copy = await cli([
      ...['copy', 'add', '--artifact-type', 'raw_data_file', '--artifact', file],
      ...['--location', location],
    ]);
    expect(copy.code, copy.stderr).toBe(0);
    const first = await cli(declare);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({
      rawDataPackageId: pkg,
      locationId: location,
      declared: true,
      files: 1,
      by: 'operator:bob',
    });
    const again = await cli(declare.slice(0, -1));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(
      `the 1 files of ${pkg} were declared complete at ${location} already; nothing changed`,
    );
    expect(await facts(pkg)).toEqual([
      { location_id: location, declared_by: 'operator:bob', op: null },
    ]);

    const unknown = await cli(['artifact', 'files-complete', randomUUID(), '--location', location]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('[NOT_FOUND]');
  });
});
