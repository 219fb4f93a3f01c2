import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { printPackage } from '../../cli/commands/printPackage.ts';
import { ArtifactType } from '../../machines/ArtifactType.ts';
import { classifyPackageStep } from '../../machines/classifyPackageStep.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultPipeline, definePipeline, type Pipeline } from '../../machines/pipeline.ts';
import { LocationType } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { DeletionPolicyRepository } from '../../persistence/DeletionPolicyRepository.ts';
import { type PackageRecord, selectPackage } from '../../persistence/reads/selectPackage.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData, type SampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { ARCHIVE_TIMING, NATS_URL } from '../archive/world.ts';
import { operationKeys } from '../helpers/pipelineOperations.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { uniquePrefix } from '../transport/helpers.ts';

/**
 * Rollback up a pipeline's lineage, run by a runtime's control plane on the real Postgres and NATS
 * with the reference stage handlers: the target stage is created again by the rollback, every
 * later stage by the pipeline's pass from the re-run, once each, all carrying the rollback's id.
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

/**
 * The pipelines run here, on one site's locations: the default one (`full`); the same without its
 * archive (`transfer`: a package ends TRANSFERRED); and one that archives each package straight
 * from the source (`direct`), whose source copy the deletion policy may then remove, leaving the
 * archive copy the package's only copy.
 */
function pipelineOf(site: string, shape: 'full' | 'transfer' | 'direct'): Pipeline {
  const full = defaultPipeline({
    source: { site, name: 'source' },
    destinations: [{ buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } }],
  });
  if (shape === 'full') return full;
  if (shape === 'transfer') {
    const { 'archive-1': _archive, ...stages } = full.stages;
    return definePipeline({ name: 'transfer-only', locations: full.locations, stages });
  }
  return definePipeline({
    name: 'direct',
    locations: { source: { site, name: 'source' }, archive: { site, name: 'archive' } },
    stages: {
      packaging: { kind: OperationKind.RAW_DATA_PACKAGE, at: 'source' },
      archive: {
        kind: OperationKind.LONG_TERM_ARCHIVE,
        after: 'packaging',
        from: 'source',
        at: 'archive',
      },
    },
  });
}

interface World {
  readonly rt: Runtime;
  readonly sample: SampleData;
  readonly pipeline: Pipeline;
  readonly plane: { stop(): Promise<void> };
}

/** A runtime running `pipeline` with every kind's reference handler, `packageCount` packages submitted. */
async function start(shape: 'full' | 'transfer' | 'direct', packageCount: number): Promise<World> {
  db = await createTestDatabase('opstate_rollback');
  dir = await mkdtemp(join(tmpdir(), 'opstate-rollback-'));
  const site = `rb-${Math.random().toString(16).slice(2, 8)}`;
  const pipeline = pipelineOf(site, shape);
  const rt = await createRuntime({
    databaseUrl: db.url,
    natsUrl: NATS_URL,
    prefix: uniquePrefix('rollback').replaceAll('.', '_'),
    timing: ARCHIVE_TIMING,
    logger: memoryLogger(),
    pipeline,
    serviceName: 'rollback-test',
  });
  runtime = rt;
  const sample = await registerSampleData(rt.artifacts, dir, { site, packageCount });
  const roots = new Map(Object.values(sample.locations).map((l) => [l.id, l.storageRoot]));
  const plane = rt.startControlPlane();
  rt.startWorker({
    kinds: [...OPERATION_KINDS],
    handlers: createStageHandlers({ storageRootOf: (id) => roots.get(id) as string }),
  });
  const packaging = SAMPLE_PIPELINE[0]?.inputs(sample, []) ?? [];
  await rt.submitMany(packaging.map((p) => ({ ...p, by: 'test' })));
  return { rt, sample, pipeline, plane };
}

/** Every operation with its subject, status, and what a rollback wrote on it. */
const operations = (rt: Runtime) => operationKeys(rt.database);

/** The rows of every table a rollback could write, as text: equal means nothing changed. */
async function tables(rt: Runtime): Promise<string> {
  const out: string[] = [];
  for (const t of [
    'operation',
    'operation_transition',
    'operation_input',
    'operation_output',
    'physical_copy',
    'physical_copy_transition',
    'pipeline_rollback',
    'pipeline_cursor',
  ]) {
    const rows = await rt.database.execute(
      sql.raw(`select coalesce(jsonb_agg(to_jsonb(x) order by to_jsonb(x)::text), '[]')::text
        as rows from ${t} x`),
    );
    out.push(`${t}: ${String(rows[0]?.rows)}`);
  }
  return out.join('\n');
}

const settled = (ops: Awaited<ReturnType<typeof operations>>) =>
  ops.every((o) => o.status === 'COMPLETED');

/** The live copies as (artifact type, artifact, location), sorted. */
async function liveCopies(rt: Runtime): Promise<string[]> {
  const rows = await rt.database.execute(sql`
    select artifact_type || '|' || artifact_id || '|' || location_id as k from physical_copy
    where status <> 'DELETED' order by 1`);
  return rows.map((r) => String(r.k));
}

/** Whether the pipeline's pass has read every transition (its cursor moves no more). */
async function passHasReadAll(rt: Runtime): Promise<boolean> {
  const [c] = await rt.database.execute(sql`
    select (select max(id) from operation_transition) <= coalesce(
      (select max(after_id) from pipeline_cursor), 0) as read`);
  return c?.read === true;
}

async function waitUntilSettled(
  rt: Runtime,
  count: (ops: Awaited<ReturnType<typeof operations>>) => boolean,
  what: string,
) {
  await waitFor(
    async () => {
      const ops = await operations(rt);
      if (!count(ops) || !settled(ops)) return false;
      return await passHasReadAll(rt);
    },
    what,
    120_000,
  );
}

/** Stops the control plane, resets the pipeline's cursor to 0, and waits for the pass to read up. */
async function rereadEverything(rt: Runtime, pipeline: Pipeline, plane: { stop(): Promise<void> }) {
  const cursorOf = async () =>
    Number(
      (
        await rt.database.execute(
          sql`select after_id from pipeline_cursor where name = ${pipeline.name}`,
        )
      )[0]?.after_id,
    );
  const reached = await cursorOf();
  await plane.stop();
  await rt.database.execute(sql`update pipeline_cursor set after_id = 0`);
  const again = rt.startControlPlane();
  await waitFor(async () => (await cursorOf()) >= reached, 'the cursor read up again', 60_000);
  return again;
}

describe('rollback up the lineage', () => {
  it('rolls a transferred package back to bundling: a dry run changes nothing; the rollback redoes bundling, transfer and unpack once each, caused by it, and reaches the same end state', async () => {
    const { rt, sample, pipeline, plane } = await start('transfer', 2);
    const done = (ops: Awaited<ReturnType<typeof operations>>) =>
      ops.filter((o) => o.kind === OperationKind.UNPACK && o.status === 'COMPLETED').length;
    await waitUntilSettled(rt, (ops) => done(ops) === 1, 'the bundle unpacked');
    const before = await operations(rt);
    const copiesBefore = await liveCopies(rt);
    const pkg = sample.packages[0]?.id as string;

    const snapshot = await tables(rt);
    const dry = await rt.rollback({
      artifact: pkg,
      to: 'bundling',
      by: 'operator:alice',
      dryRun: true,
    });
    expect(await tables(rt)).toBe(snapshot);
    expect(dry.rollbackId).toBeNull();
    expect(dry.stages).toEqual(['bundling', 'transfer-1', 'unpack-1']);
    expect(dry.redone.map((r) => r.stage)).toEqual(['bundling', 'transfer-1', 'unpack-1']);
    expect(dry.created).toHaveLength(1);
    expect(dry.created[0]?.operationId).toBeNull();
    // The bundle at the source and at the buffer, and both packages unpacked at the buffer.
    expect(dry.superseded.map((c) => `${c.stage}:${c.artifactType}`).sort()).toEqual([
      `bundling:${ArtifactType.DATA_TRANSFER_PACKAGE}`,
      `transfer-1:${ArtifactType.DATA_TRANSFER_PACKAGE}`,
      `unpack-1:${ArtifactType.RAW_DATA_PACKAGE}`,
      `unpack-1:${ArtifactType.RAW_DATA_PACKAGE}`,
    ]);

    const r = await rt.rollback({ artifact: pkg, to: 'bundling', by: 'operator:alice' });
    const id = r.rollbackId as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.redone.map((o) => o.operationId)).toEqual(dry.redone.map((o) => o.operationId));
    await waitUntilSettled(
      rt,
      (ops) => ops.some((o) => o.kind === OperationKind.UNPACK && o.rollbackId === id),
      'the re-run unpacked',
    );
    const after = await operations(rt);
    const caused = after.filter((o) => o.rollbackId === id);
    expect(caused.map((o) => o.kind).sort()).toEqual(
      [OperationKind.DATA_TRANSFER_PACKAGE, OperationKind.TRANSFER, OperationKind.UNPACK].sort(),
    );
    expect(caused.find((o) => o.kind === OperationKind.DATA_TRANSFER_PACKAGE)?.createdBy).toBe(
      'operator:alice',
    );
    expect(
      caused.filter((o) => o.kind !== OperationKind.DATA_TRANSFER_PACKAGE).map((o) => o.createdBy),
    ).toEqual([`pipeline:${pipeline.name}`, `pipeline:${pipeline.name}`]);
    // The redone operations are superseded by it; nothing else changed or was added.
    expect(
      after
        .filter((o) => o.supersededBy === id)
        .map((o) => o.id)
        .sort(),
    ).toEqual(r.redone.map((o) => o.operationId).sort());
    expect(after.length).toBe(before.length + 3);
    const current = after.filter((o) => o.supersededBy === null);
    expect(current.map((o) => o.key).sort()).toEqual(before.map((o) => o.key).sort());
    expect(await liveCopies(rt)).toEqual(copiesBefore);
    const [row] = await rt.database.execute(sql`
      select artifact_type, artifact_id::text, stage, requested_by, pipeline, plan from pipeline_rollback`);
    expect(row).toMatchObject({
      artifact_type: ArtifactType.RAW_DATA_PACKAGE,
      artifact_id: pkg,
      stage: 'bundling',
      requested_by: 'operator:alice',
      pipeline: pipeline.name,
    });
    expect((row?.plan as { redone: unknown[] } | undefined)?.redone).toHaveLength(3);

    // A leader that reads the whole history again (the superseded completions among it) creates
    // nothing more: each stage ran once for the rollback.
    await rereadEverything(rt, pipeline, plane);
    expect((await operations(rt)).map((o) => o.id)).toEqual(after.map((o) => o.id));
  }, 240_000);

  it('rolls an archived package back to transfer: transfer, unpack and the archive of every package of its bundle run again once each (the unpack writes each member again)', async () => {
    const { rt, sample } = await start('full', 2);
    const archived = (ops: Awaited<ReturnType<typeof operations>>) =>
      ops.filter((o) => o.kind === OperationKind.LONG_TERM_ARCHIVE).length;
    await waitUntilSettled(rt, (ops) => archived(ops) === 2, 'both packages archived');
    const before = await operations(rt);
    const copiesBefore = await liveCopies(rt);
    const [first, second] = sample.packages.map((p) => p.id) as [string, string];

    const r = await rt.rollback({ artifact: first, to: 'transfer-1' });
    const id = r.rollbackId as string;
    expect(r.by).toBe('rollback-test');
    expect(r.stages).toEqual(['transfer-1', 'unpack-1', 'archive-1']);
    expect(r.redone.map((o) => `${o.stage}:${o.subjectId}`).sort()).toEqual(
      [
        `transfer-1:${sample.dataTransferPackage.id}`,
        `unpack-1:${sample.dataTransferPackage.id}`,
        `archive-1:${first}`,
        `archive-1:${second}`,
      ].sort(),
    );
    expect(r.widened).toEqual([second]);
    await waitUntilSettled(
      rt,
      (ops) =>
        ops.filter((o) => o.kind === OperationKind.LONG_TERM_ARCHIVE && o.rollbackId === id)
          .length === 2,
      'the re-run archived both packages',
    );
    const after = await operations(rt);
    expect(
      after
        .filter((o) => o.rollbackId === id)
        .map((o) => o.key)
        .sort(),
    ).toEqual(
      before
        .filter((o) => r.redone.some((x) => x.operationId === o.id))
        .map((o) => o.key)
        .sort(),
    );
    expect(after.length).toBe(before.length + 4);
    expect(
      after
        .filter((o) => o.supersededBy === null)
        .map((o) => o.key)
        .sort(),
    ).toEqual(before.map((o) => o.key).sort());
    // The other package's archive ran again too, for the rollback: its buffer copy was written
    // again by the unpack, and an archive reads it.
    const otherArchive = (ops: typeof before) =>
      ops.find(
        (o) =>
          o.kind === OperationKind.LONG_TERM_ARCHIVE &&
          o.key.includes(second) &&
          o.supersededBy === null,
      );
    expect(otherArchive(after)?.id).not.toBe(otherArchive(before)?.id);
    expect(otherArchive(after)?.rollbackId).toBe(id);
    expect(await liveCopies(rt)).toEqual(copiesBefore);
    const otherStep = classifyPackageStep(
      ((await selectPackage(rt.database, second)) as PackageRecord).facts,
      Date.now(),
    );
    expect(otherStep.state).toBe('ARCHIVED');
    // The package reads ARCHIVED again, from what runs now; inspect lists the rollback.
    const record = (await selectPackage(rt.database, first)) as PackageRecord;
    const step = classifyPackageStep(record.facts, Date.now());
    expect(step.state).toBe('ARCHIVED');
    expect(record.rollbacks).toMatchObject([
      { id, stage: 'transfer-1', requestedBy: 'rollback-test', redone: 4 },
    ]);
    const lines: string[] = [];
    printPackage(record, step, { out: (l) => lines.push(l), err: () => undefined });
    expect(lines.join('\n')).toContain(`to 'transfer-1' by rollback-test, 4 operations redone`);
  }, 240_000);

  it('refuses a rollback that would leave a package with no copy outside what it supersedes (its archive copy, once the policy removed the source copy the archive reads), naming both copies; nothing changes', async () => {
    const { rt, sample } = await start('direct', 1);
    const pkg = sample.packages[0]?.id as string;
    await waitUntilSettled(
      rt,
      (ops) => ops.some((o) => o.kind === OperationKind.LONG_TERM_ARCHIVE),
      'the package archived',
    );
    // The policy cleans the source once the archive is verified: the archive copy is then the
    // package's only copy.
    await new DeletionPolicyRepository(rt.database).set(
      { graceSeconds: 0, cleanLocationTypes: [LocationType.SOURCE] },
      'test',
    );
    const deleter = rt.startCopyDeleter({ intervalMs: 100, leaseMs: 2_000 });
    const packageCopies = () =>
      rt.database.execute(sql`
        select c.id::text, c.status, l.location_type from physical_copy c
        join data_location l on l.id = c.location_id
        where c.artifact_id = ${pkg}::uuid order by c.id`);
    await waitFor(
      async () => (await packageCopies()).some((c) => c.status === 'DELETED'),
      'the source copy deleted',
      60_000,
    );
    await deleter.stop();
    const copies = await packageCopies();
    const source = copies.find((c) => c.location_type === LocationType.SOURCE);
    const archive = copies.find((c) => c.location_type === LocationType.LONG_TERM_ARCHIVE);
    expect(source?.status).toBe('DELETED');
    expect(archive?.status).toBe('PRESENT');

    const snapshot = await tables(rt);
    const refused = rt.rollback({ artifact: pkg, to: 'archive', by: 'operator:alice' });
    await expect(refused).rejects.toMatchObject({
      code: OpstateErrorCode.UNSAFE,
      message: expect.stringContaining(
        `would leave raw_data_package ${pkg} with no copy to produce it again from: 'archive' reads copy ${String(source?.id)} (raw_data_package ${pkg} at`,
      ),
    });
    await expect(refused).rejects.toThrow(
      `its only live copy is copy ${String(archive?.id)} (raw_data_package ${pkg} at`,
    );
    expect(await tables(rt)).toBe(snapshot);
  }, 240_000);

  it('refuses bad input with nothing changed: an unknown stage, an id that is no uuid or names nothing, a stage the artifact never reached or before its first', async () => {
    const { rt, sample } = await start('transfer', 1);
    await waitUntilSettled(
      rt,
      (ops) => ops.some((o) => o.kind === OperationKind.UNPACK),
      'the bundle unpacked',
    );
    const pkg = sample.packages[0]?.id as string;
    const snapshot = await tables(rt);
    await expect(rt.rollback({ artifact: pkg, to: 'archive-1' })).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
      message: expect.stringContaining(
        "pipeline 'transfer-only' has no stage 'archive-1'; its stages: packaging, bundling, transfer-1, unpack-1",
      ),
    });
    await expect(rt.rollback({ artifact: 'pkg-1', to: 'bundling' })).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
    });
    await expect(
      rt.rollback({ artifact: '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f', to: 'bundling' }),
    ).rejects.toMatchObject({
      code: OpstateErrorCode.NOT_FOUND,
      message: expect.stringContaining('no raw data package or data transfer package'),
    });
    await expect(
      rt.rollback({ artifact: sample.dataTransferPackage.id, to: 'packaging' }),
    ).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
      message: expect.stringContaining(
        `stage 'packaging' comes before data transfer package ${sample.dataTransferPackage.id}'s first stage 'bundling'`,
      ),
    });
    await expect(
      rt.rollback({ artifact: pkg, to: 'bundling', by: 'my service' }),
    ).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
    });
    const unpackaged = await rt.artifacts.addRawDataPackage({ name: 'never-packaged' });
    await expect(rt.rollback({ artifact: unpackaged, to: 'packaging' })).rejects.toMatchObject({
      code: OpstateErrorCode.BAD_INPUT,
      message: expect.stringContaining(
        `raw_data_package ${unpackaged} never reached stage 'packaging'`,
      ),
    });
    expect(await tables(rt)).toBe(snapshot);

    // A stage to redo with a live operation (a second packaging due tomorrow): CONFLICT, naming it.
    const packaging = SAMPLE_PIPELINE[0]?.inputs(sample, []) ?? [];
    const waiting = await rt.submit({
      ...(packaging[0] as (typeof packaging)[number]),
      by: 'test',
      notBefore: new Date(Date.now() + 86_400_000),
    });
    await waitFor(() => passHasReadAll(rt), 'the pass read the submission', 60_000);
    const live = await tables(rt);
    await expect(rt.rollback({ artifact: pkg, to: 'packaging' })).rejects.toMatchObject({
      code: OpstateErrorCode.CONFLICT,
      message: expect.stringContaining(`operation ${waiting} of stage 'packaging' is PENDING`),
    });
    expect(await tables(rt)).toBe(live);
  }, 240_000);
});
