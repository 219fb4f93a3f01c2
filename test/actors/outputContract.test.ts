import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import type { InputRelations } from '../../persistence/inputRelations.ts';
import type { OutputCopy } from '../../persistence/OutputCopy.ts';
import { archiveStandIn } from '../../stages/archiveStandIn.ts';
import type { OperationHandler } from '../../worker/OperationHandler.ts';
import { makeWorld, type World } from '../persistence/fixtures.ts';
import { type Deployment, startDeployment, waitFor } from './harness.ts';

/**
 * The output contract end to end, on the real Postgres and NATS JetStream: handlers that return
 * less than their kind must produce end FAILED for good with what is missing named; right ones
 * complete. The handlers build their outputs from the operation's fields and `ctx.relations()`, by
 * hand, as a stage service would.
 */
let dep: Deployment;
let w: World & { pkg2: string; dtpCopy: string; pkg2Copy: string; otherBuffer: string };
/** What each unpack handler saw of its inputs' relations, by operation id. */
const seen = new Map<string, readonly InputRelations[]>();

const archive: OperationHandler = async (ctx) => {
  const { fields } = await ctx.inspect();
  // The wrong archive handler: it does its work and forgets to report the archive copy.
  if (fields.archiveKey === 'forgets-the-copy') return { outputs: [] };
  // The garbage handler: its one output names the package by its name, not its id.
  if (fields.archiveKey === 'garbage')
    return {
      outputs: [
        {
          artifactType: 'raw_data_package',
          artifactId: 'rdp-by-name',
          locationId: fields.destinationLocationId as string,
        },
      ],
    };
  // The handler that reports the archive copy but archived nothing through opstate: no record.
  if (fields.archiveKey === 'no-record')
    return {
      outputs: [
        {
          artifactType: 'raw_data_package',
          artifactId: fields.rawDataPackageId as string,
          locationId: fields.destinationLocationId as string,
          checksum: 'sha256:00',
        },
      ],
    };
  return archiveStandIn(ctx);
};

const unpack: OperationHandler = async (ctx) => {
  const { fields } = await ctx.inspect();
  const relations = await ctx.relations();
  seen.set(ctx.operation.id, relations);
  const bundle = relations.find((r) => r.artifact.type === 'data_transfer_package');
  const members = bundle?.members ?? [];
  // The wrong unpack handler (at the first buffer) stops after the first package of two.
  const unpacked = fields.locationId === w.buffer.id ? members.slice(0, 1) : members;
  return {
    outputs: unpacked.map(
      (m): OutputCopy => ({
        artifactType: 'raw_data_package',
        artifactId: m.id,
        locationId: fields.locationId as string,
      }),
    ),
  };
};

beforeAll(async () => {
  dep = await startDeployment();
  const base = await makeWorld(dep.runtime.database);
  const pkg2 = await base.artifacts.addRawDataPackage({
    name: `rdp-b-${randomUUID()}`,
    dataTransferPackageId: base.dtp,
  });
  const dtpCopy = await base.artifacts.addCopy({
    artifactType: 'data_transfer_package',
    artifactId: base.dtp,
    locationId: base.buffer.id,
  });
  const pkg2Copy = await base.artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg2,
    locationId: base.source.id,
  });
  const otherBuffer = await base.artifacts.addLocation({
    site: base.buffer.site,
    name: 'buffer-2',
    locationType: LocationType.BUFFER,
    storageRoot: '/data/buffer-2',
  });
  w = {
    ...base,
    pkg2,
    dtpCopy: dtpCopy.copy.id,
    pkg2Copy: pkg2Copy.copy.id,
    otherBuffer: otherBuffer.id,
  };
  dep.runtime.startControlPlane();
  dep.runtime.startWorker({
    kinds: [OperationKind.UNPACK, OperationKind.LONG_TERM_ARCHIVE],
    handlers: { [OperationKind.UNPACK]: unpack, [OperationKind.LONG_TERM_ARCHIVE]: archive },
  });
});

afterAll(async () => {
  await dep?.close();
});

const terminal = async (id: string) => {
  await waitFor(async () => {
    const { status } = await dep.runtime.store.load(id);
    return status === 'COMPLETED' || status === 'FAILED';
  }, `operation ${id} to finish`);
  return dep.runtime.get(id);
};

describe('the output contract at completion (Postgres + NATS JetStream)', () => {
  it('fails for good a wrong handler, naming what is missing, and completes a right one', async () => {
    const archiveTo = (
      archiveKey: string,
      pkg: string,
      input: string,
    ): CreateOperationInput<OperationKind.LONG_TERM_ARCHIVE> => ({
      kind: OperationKind.LONG_TERM_ARCHIVE,
      fields: {
        rawDataPackageId: pkg,
        sourceLocationId: w.source.id,
        destinationLocationId: w.archive.id,
        archiveKey,
      },
      inputs: [input],
    });
    const unpackAt = (locationId: string): CreateOperationInput<OperationKind.UNPACK> => ({
      kind: OperationKind.UNPACK,
      fields: { dataTransferPackageId: w.dtp, locationId },
      inputs: [w.dtpCopy],
    });
    const [wrongArchive, rightArchive, wrongUnpack, rightUnpack, unrecorded] =
      (await dep.runtime.submitMany([
        archiveTo('forgets-the-copy', w.pkg, w.sourceCopy),
        archiveTo(`right-${randomUUID()}`, w.pkg2, w.pkg2Copy),
        unpackAt(w.buffer.id),
        unpackAt(w.otherBuffer),
        archiveTo('no-record', w.pkg, w.sourceCopy),
      ])) as [string, string, string, string, string];

    const failedArchive = await terminal(wrongArchive);
    expect(failedArchive.status).toBe('FAILED');
    expect(failedArchive.lastError).toMatchObject({
      code: OpstateErrorCode.OUTPUT_CONTRACT,
      retryable: false,
    });
    expect(failedArchive.lastError?.message).toContain(
      `long_term_archive operation ${wrongArchive} returned without 2 outputs its kind must produce: raw_data_package ${w.pkg} (rawDataPackageId) at location ${w.archive.id} (destinationLocationId); a VERIFIED archive record of raw_data_package ${w.pkg}`,
    );
    // Not retried: one attempt, straight to FAILED, with its budget untouched.
    expect(failedArchive.transitions.map((t) => `${t.event}:${t.to}`)).toEqual([
      'CREATE:PENDING',
      'SCHEDULE:SCHEDULED',
      'START:IN_PROGRESS',
      'FAIL:FAILED',
    ]);
    expect(failedArchive.retryCount).toBe(0);
    expect(failedArchive.outputs).toEqual([]);
    expect(await w.artifacts.findLiveCopy('raw_data_package', w.pkg, w.archive.id)).toBeUndefined();

    // Reporting the archive copy is not enough: without a VERIFIED archive record it fails for good.
    const noRecord = await terminal(unrecorded);
    expect(noRecord.status).toBe('FAILED');
    expect(noRecord.lastError).toMatchObject({
      code: OpstateErrorCode.OUTPUT_CONTRACT,
      retryable: false,
    });
    expect(noRecord.lastError?.message).toContain(
      `a VERIFIED archive record of raw_data_package ${w.pkg} at location ${w.archive.id} (destinationLocationId): the operation has no archive record`,
    );
    expect(noRecord.transitions.filter((t) => t.event === 'START')).toHaveLength(1);
    expect(noRecord.outputs).toEqual([]);

    const failedUnpack = await terminal(wrongUnpack);
    expect(failedUnpack.status).toBe('FAILED');
    expect(failedUnpack.lastError).toMatchObject({
      code: OpstateErrorCode.OUTPUT_CONTRACT,
      retryable: false,
    });
    const [first, second] = seen.get(wrongUnpack)?.[0]?.members ?? [];
    expect(failedUnpack.lastError?.message).toContain(
      `unpack operation ${wrongUnpack} returned without an output its kind must produce: raw_data_package ${second?.id} (a member of data transfer package ${w.dtp}, dataTransferPackageId) at location ${w.buffer.id} (locationId)`,
    );
    expect(failedUnpack.lastError?.message).not.toContain(`raw_data_package ${first?.id}`);
    expect(failedUnpack.transitions.filter((t) => t.event === 'START')).toHaveLength(1);
    // The one package it did return was not created either: a refused completion writes nothing.
    expect(
      await w.artifacts.findLiveCopy('raw_data_package', first?.id as string, w.buffer.id),
    ).toBeUndefined();

    const archived = await terminal(rightArchive);
    expect(archived.status).toBe('COMPLETED');
    expect(archived.outputs.map((c) => [c.artifactId, c.locationId])).toEqual([
      [w.pkg2, w.archive.id],
    ]);
    const unpacked = await terminal(rightUnpack);
    expect(unpacked.status).toBe('COMPLETED');
    expect(unpacked.outputs.map((c) => c.artifactId).sort()).toEqual([w.pkg, w.pkg2].sort());

    // What the unpack handlers read through ctx.relations(): the transfer package's two packages.
    for (const id of [wrongUnpack, rightUnpack]) {
      const [bundle, ...rest] = seen.get(id) ?? [];
      expect(rest).toEqual([]);
      expect(bundle).toMatchObject({
        copyId: w.dtpCopy,
        artifact: { type: 'data_transfer_package', id: w.dtp },
        partOf: null,
      });
      expect(bundle?.members.map((m) => m.id).sort()).toEqual([w.pkg, w.pkg2].sort());
    }
    expect(
      dep.logger.lines.filter(
        (l) => l.message === 'operation failed' && l.fields.retryable === false,
      ),
    ).toHaveLength(3);
  });

  it('fails for good a handler that returns malformed outputs, naming what is wrong', async () => {
    const garbage = await dep.runtime.submit({
      kind: OperationKind.LONG_TERM_ARCHIVE,
      fields: {
        rawDataPackageId: w.pkg,
        sourceLocationId: w.source.id,
        destinationLocationId: w.archive.id,
        archiveKey: 'garbage',
      },
      inputs: [w.sourceCopy],
    });
    const failed = await terminal(garbage);
    expect(failed.status).toBe('FAILED');
    expect(failed.lastError).toMatchObject({ code: OpstateErrorCode.BAD_INPUT, retryable: false });
    expect(failed.lastError?.message).toBe(
      `output 0 of operation ${garbage}: artifactId must be a uuid such as 0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f; got 'rdp-by-name'`,
    );
    // Not retried: one attempt, straight to FAILED, with its budget untouched.
    expect(failed.transitions.map((t) => `${t.event}:${t.to}`)).toEqual([
      'CREATE:PENDING',
      'SCHEDULE:SCHEDULED',
      'START:IN_PROGRESS',
      'FAIL:FAILED',
    ]);
    expect(failed.retryCount).toBe(0);
    expect(failed.outputs).toEqual([]);
  });
});
