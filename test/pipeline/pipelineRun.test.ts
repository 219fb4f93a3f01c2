import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { resolvePipelineLocations } from '../../control-plane/pipelineLoop.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultPipeline } from '../../machines/pipeline.ts';
import { LocationType } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { ARCHIVE_TIMING, NATS_URL } from '../archive/world.ts';
import { operationKeys } from '../helpers/pipelineOperations.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { uniquePrefix } from '../transport/helpers.ts';

/**
 * The default pipeline run by a runtime's control plane on the real Postgres and NATS: each
 * package's files are declared complete (the first test) or its packaging is submitted; the
 * leader's pipeline pass creates every stage from there.
 */
let db: TestDatabase | undefined;
let runtime: Runtime | undefined;
let dir: string | undefined;

afterEach(async () => {
  if (runtime !== undefined) {
    await (runtime.transport as JetStreamTransport).destroy?.().catch(() => undefined);
    await runtime.close();
  }
  await dropTestDatabase(db);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  runtime = undefined;
  db = undefined;
  dir = undefined;
});

describe('a runtime with a pipeline', () => {
  it('creates every stage from the files declared complete: each package reaches its long-term archive, one operation per (kind, subject, location)', async () => {
    db = await createTestDatabase('opstate_pipe');
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-'));
    const site = `pipe-${Math.random().toString(16).slice(2, 8)}`;
    const pipeline = defaultPipeline({
      source: { site, name: 'source' },
      destinations: [{ buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } }],
    });
    const logger = memoryLogger();
    const rt = await createRuntime({
      databaseUrl: db.url,
      natsUrl: NATS_URL,
      prefix: uniquePrefix('pipe').replaceAll('.', '_'),
      timing: ARCHIVE_TIMING,
      logger,
      pipeline,
    });
    runtime = rt;
    const sample = await registerSampleData(rt.artifacts, dir, { site, packageCount: 4 });
    const roots = new Map(Object.values(sample.locations).map((l) => [l.id, l.storageRoot]));
    const plane = rt.startControlPlane();
    rt.startWorker({
      kinds: [...OPERATION_KINDS],
      handlers: createStageHandlers({
        storageRootOf: (id) => roots.get(id) as string,
      }),
    });
    // Nothing is submitted: each package's files are declared complete at the source.
    for (const p of sample.packages) {
      await rt.artifacts.declareFilesComplete({
        rawDataPackageId: p.id,
        locationId: sample.locations.source.id,
      });
    }

    const archived = () =>
      operationKeys(rt.database).then(
        (ops) =>
          ops.filter((o) => o.kind === OperationKind.LONG_TERM_ARCHIVE && o.status === 'COMPLETED')
            .length,
      );
    await waitFor(async () => (await archived()) === 4, '4 archives COMPLETED', 120_000);
    const ops = await operationKeys(rt.database);
    const perKind = (kind: string) => ops.filter((o) => o.kind === kind).length;
    expect(perKind(OperationKind.RAW_DATA_PACKAGE)).toBe(4);
    expect(perKind(OperationKind.DATA_TRANSFER_PACKAGE)).toBe(1);
    expect(perKind(OperationKind.TRANSFER)).toBe(1);
    expect(perKind(OperationKind.UNPACK)).toBe(1);
    expect(perKind(OperationKind.LONG_TERM_ARCHIVE)).toBe(4);
    expect(ops.every((o) => o.status === 'COMPLETED')).toBe(true);
    expect(new Set(ops.map((o) => o.key)).size).toBe(ops.length);
    // Each archive is of one of the packages, in the pipeline's archive location.
    expect(
      ops
        .filter((o) => o.kind === OperationKind.LONG_TERM_ARCHIVE)
        .map((o) => o.key)
        .sort(),
    ).toEqual(
      sample.packages
        .map((p) => `${OperationKind.LONG_TERM_ARCHIVE}|${p.id}|${sample.locations.archive.id}`)
        .sort(),
    );
    // The pipeline's operations carry their subject; the cursor moved past their completions.
    const [marked] = await rt.database.execute(
      sql`select count(*)::int as n from operation where pipeline_subject_id is not null`,
    );
    expect(Number(marked?.n)).toBe(11);

    // A leader that starts over from a cursor that never moved (as after a crash before its
    // write) reads every completion again and creates nothing twice.
    const cursorOf = async () =>
      Number(
        (
          await rt.database.execute(
            sql`select after_id from pipeline_cursor where name = ${pipeline.name}`,
          )
        )[0]?.after_id,
      );
    const reached = await cursorOf();
    expect(reached).toBeGreaterThan(0);
    await plane.stop();
    await rt.database.execute(sql`update pipeline_cursor set after_id = 0`);
    rt.startControlPlane();
    await waitFor(async () => (await cursorOf()) >= reached, 'the cursor read up again', 60_000);
    const again = await operationKeys(rt.database);
    expect(again.map((o) => o.key).sort()).toEqual(ops.map((o) => o.key).sort());
  }, 180_000);

  it('two destinations: each bundle transferred, unpacked and archived at both sites, and a package ARCHIVED only once both hold its archive', async () => {
    db = await createTestDatabase('opstate_pipe2');
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-'));
    const tag = Math.random().toString(16).slice(2, 8);
    const [site, far] = [`pipe-${tag}`, `far-${tag}`];
    const pipeline = defaultPipeline({
      source: { site, name: 'source' },
      destinations: [
        { buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } },
        { buffer: { site: far, name: 'buffer' }, archive: { site: far, name: 'archive' } },
      ],
    });
    const rt = await createRuntime({
      databaseUrl: db.url,
      natsUrl: NATS_URL,
      prefix: uniquePrefix('pipe2').replaceAll('.', '_'),
      // The far transfer waits unserved for the first half: the reconciler must not take it back.
      timing: { ...ARCHIVE_TIMING, reconcilerFloorMs: 240_000, ackWaitMs: 300_000 },
      logger: memoryLogger(),
      pipeline,
    });
    runtime = rt;
    const sample = await registerSampleData(rt.artifacts, dir, { site, packageCount: 3 });
    const farLocations = await Promise.all(
      [LocationType.BUFFER, LocationType.LONG_TERM_ARCHIVE].map(async (locationType) => {
        const name = locationType === LocationType.BUFFER ? 'buffer' : 'archive';
        const storageRoot = join(dir as string, far, name);
        await mkdir(storageRoot, { recursive: true });
        return rt.artifacts.addLocation({ site: far, name, locationType, storageRoot });
      }),
    );
    const roots = new Map(
      [...Object.values(sample.locations), ...farLocations].map((l) => [l.id, l.storageRoot]),
    );
    const [farBuffer, farArchive] = farLocations as [
      (typeof farLocations)[0],
      (typeof farLocations)[0],
    ];
    rt.startControlPlane();
    const handlers = createStageHandlers({ storageRootOf: (id) => roots.get(id) as string });
    // Only the source site's worker at first: the far site's queues wait.
    const near = rt.startWorker({ kinds: [...OPERATION_KINDS], handlers, site });
    await near.ready;
    await rt.submitMany(
      (SAMPLE_PIPELINE[0]?.inputs(sample, []) ?? []).map((p) => ({ ...p, by: 'test' })),
    );
    const archivedAt = async (locationId: string) =>
      (await operationKeys(rt.database)).filter(
        (o) =>
          o.kind === OperationKind.LONG_TERM_ARCHIVE &&
          o.status === 'COMPLETED' &&
          o.key.endsWith(`|${locationId}`),
      ).length;
    await waitFor(
      async () => (await archivedAt(sample.locations.archive.id)) === 3,
      '3 archives COMPLETED at the source site',
      120_000,
    );
    // Archived at one destination of two: not ARCHIVED; the far transfer waits, created once.
    const halfway = await countPackageStates(rt.database);
    expect(halfway.raw_data_package.ARCHIVED).toBe(0);
    expect(halfway.raw_data_package.TRANSFERRING).toBe(3);
    const farTransfers = (await operationKeys(rt.database)).filter(
      (o) => o.kind === OperationKind.TRANSFER && o.key.endsWith(`|${farBuffer.id}`),
    );
    expect(farTransfers).toHaveLength(1);
    expect(['PENDING', 'SCHEDULED']).toContain(farTransfers[0]?.status);

    // The far site's worker comes: the branch there goes on to its archives.
    rt.startWorker({ kinds: [...OPERATION_KINDS], handlers, site: far });
    await waitFor(
      async () => (await archivedAt(farArchive.id)) === 3,
      '3 archives COMPLETED at the far site',
      120_000,
    );
    const ops = await operationKeys(rt.database);
    const perKind = (kind: string) => ops.filter((o) => o.kind === kind).length;
    expect(
      [
        OperationKind.RAW_DATA_PACKAGE,
        OperationKind.DATA_TRANSFER_PACKAGE,
        OperationKind.TRANSFER,
        OperationKind.UNPACK,
        OperationKind.LONG_TERM_ARCHIVE,
      ].map(perKind),
    ).toEqual([3, 1, 2, 2, 6]);
    expect(ops.every((o) => o.status === 'COMPLETED')).toBe(true);
    expect(new Set(ops.map((o) => o.key)).size).toBe(ops.length);
    const done = await countPackageStates(rt.database);
    expect(done.raw_data_package.ARCHIVED).toBe(3);
    expect(done.data_transfer_package.ARCHIVED).toBe(1);
  }, 300_000);

  it('refuses a pipeline naming a location that is not registered with CONFIG, naming the stage and location', async () => {
    db = await createTestDatabase('opstate_pipe');
    const rt = await createRuntime({
      databaseUrl: db.url,
      natsUrl: NATS_URL,
      logger: memoryLogger(),
      prefix: uniquePrefix('pipe').replaceAll('.', '_'),
    });
    runtime = rt;
    const site = 'nowhere';
    const pipeline = defaultPipeline({
      source: { site, name: 'source' },
      destinations: [{ buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } }],
    });
    await expect(resolvePipelineLocations(rt.database, pipeline)).rejects.toMatchObject({
      code: OpstateErrorCode.CONFIG,
      message: expect.stringMatching(
        /stage 'packaging' names location 'source' \(nowhere\/source\)/,
      ),
    });
  });
});
