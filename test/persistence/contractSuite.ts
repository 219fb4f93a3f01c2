import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { type CompleteItem, completeWithOutputs } from '../../persistence/completeWithOutputs.ts';
import { inputRelations } from '../../persistence/inputRelations.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import type { OutputCopy } from '../../persistence/OutputCopy.ts';
import type { Database, Executor } from '../../persistence/openDatabase.ts';
import { requiredOutputsOf } from '../../persistence/requiredOutputsOf.ts';
import { inputFor, makeWorld, tableCounts, type World } from './fixtures.ts';
import type { SuiteBackend } from './storeSuite.ts';
import { verifiedArchiveOutput } from './verifiedArchive.ts';

/** An executor that counts the statements it runs. */
function counting(database: Database): Executor & { statements: number } {
  const counter = {
    statements: 0,
    execute: ((query) => {
      counter.statements++;
      return database.execute(query);
    }) as Executor['execute'],
  };
  return counter;
}

/**
 * The world of `makeWorld` plus a second raw data package in its transfer package, with two
 * files, and copies of the transfer package at the buffer and of the package at the source.
 */
async function richWorld(database: Database) {
  const w = await makeWorld(database);
  const pkg2 = await w.artifacts.addRawDataPackage({
    name: `rdp-b-${randomUUID()}`,
    dataTransferPackageId: w.dtp,
  });
  const files = [];
  for (const name of ['b.fits', 'a.fits']) {
    const id = await w.artifacts.addRawDataFile({ name, rawDataPackageId: pkg2 });
    const { copy } = await w.artifacts.addCopy({
      artifactType: 'raw_data_file',
      artifactId: id,
      locationId: w.source.id,
    });
    files.push({ id, name, copy: copy.id });
  }
  const pkg2Copy = await w.artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg2,
    locationId: w.source.id,
  });
  const dtpCopy = await w.artifacts.addCopy({
    artifactType: 'data_transfer_package',
    artifactId: w.dtp,
    locationId: w.buffer.id,
  });
  return { ...w, pkg2, files, pkg2Copy: pkg2Copy.copy.id, dtpCopy: dtpCopy.copy.id };
}

/** One IN_PROGRESS operation of every kind (the unpack consumes the transfer package's copy). */
async function startedOfEveryKind(store: OperationStore, w: World & { dtpCopy: string }) {
  const ids = await store.createMany(
    OPERATION_KINDS.map((kind) =>
      kind === OperationKind.UNPACK
        ? { ...inputFor(kind, w), inputs: [w.dtpCopy] }
        : inputFor(kind, w),
    ),
  );
  for (const id of ids) {
    await store.apply(id, { type: 'SCHEDULE' });
    await store.apply(id, { type: 'START', attempt: 1, workerId: 'w-contract' });
  }
  return Object.fromEntries(OPERATION_KINDS.map((k, n) => [k, ids[n] as string])) as Record<
    OperationKind,
    string
  >;
}

/** What a right handler of each kind returns in the rich world, written out by hand. */
function rightOutputs(
  w: Awaited<ReturnType<typeof richWorld>>,
): Record<OperationKind, OutputCopy[]> {
  const pkgAt = (artifactId: string, locationId: string): OutputCopy => ({
    artifactType: 'raw_data_package',
    artifactId,
    locationId,
  });
  const dtpAt = (locationId: string): OutputCopy => ({
    artifactType: 'data_transfer_package',
    artifactId: w.dtp,
    locationId,
  });
  return {
    [OperationKind.RAW_DATA_PACKAGE]: [pkgAt(w.pkg, w.source.id)],
    [OperationKind.DATA_TRANSFER_PACKAGE]: [dtpAt(w.source.id)],
    [OperationKind.TRANSFER]: [dtpAt(w.buffer.id)],
    [OperationKind.UNPACK]: [pkgAt(w.pkg, w.buffer.id), pkgAt(w.pkg2, w.buffer.id)],
    [OperationKind.LONG_TERM_ARCHIVE]: [pkgAt(w.pkg, w.archive.id)],
    [OperationKind.STAGING]: [pkgAt(w.pkg, w.processing.id)],
  };
}

/**
 * The output contract where completions are written, and the relations a handler reads, on every
 * backend. Call inside a `describe` after the file's `beforeAll` has opened and migrated.
 */
export function contractSuite(backend: SuiteBackend): void {
  const db = () => backend.database();

  it('completes a batch of every kind that meets its contract in the same two statements as before', async () => {
    const store = new OperationStore(db());
    const w = await richWorld(db());
    const ids = await startedOfEveryKind(store, w);
    const right = rightOutputs(w);
    // The archive went through the archive protocol: its copy carries the VERIFIED checksum.
    right[OperationKind.LONG_TERM_ARCHIVE] = [
      await verifiedArchiveOutput(db(), ids[OperationKind.LONG_TERM_ARCHIVE]),
    ];
    for (const kind of OPERATION_KINDS) {
      const required = await requiredOutputsOf(db(), ids[kind]);
      expect(
        required.map((c) => `${c.artifactType}/${c.artifactId}@${c.locationId}`).sort(),
        kind,
      ).toEqual(right[kind].map((c) => `${c.artifactType}/${c.artifactId}@${c.locationId}`).sort());
    }
    const exec = counting(db());
    const items: CompleteItem[] = OPERATION_KINDS.map((k) => ({
      id: ids[k],
      attempt: 1,
      outputs: right[k],
    }));
    const results = await completeWithOutputs(exec, items, new Date());
    expect(results.map((r) => r.ok)).toEqual(OPERATION_KINDS.map(() => true));
    // One select (with the contract's facts) and one write, whatever the kinds in the batch.
    expect(exec.statements).toBe(2);
  });

  it('refuses, in the same batch, only the completions that lack what their kind must produce, and writes nothing for them', async () => {
    const store = new OperationStore(db());
    const w = await richWorld(db());
    const ids = await startedOfEveryKind(store, w);
    const right = rightOutputs(w);
    const wrong: Partial<Record<OperationKind, OutputCopy[]>> = {
      // An archive handler that archived and returned nothing; an unpack that returned one package
      // of two.
      [OperationKind.LONG_TERM_ARCHIVE]: [],
      [OperationKind.UNPACK]: [
        { artifactType: 'raw_data_package', artifactId: w.pkg, locationId: w.buffer.id },
      ],
    };
    const before = {
      archive: await store.load(ids[OperationKind.LONG_TERM_ARCHIVE]),
      unpack: await store.load(ids[OperationKind.UNPACK]),
    };
    const exec = counting(db());
    const results = await completeWithOutputs(
      exec,
      OPERATION_KINDS.map((k) => ({ id: ids[k], attempt: 1, outputs: wrong[k] ?? right[k] })),
      new Date(),
    );
    expect(exec.statements).toBe(2);
    const byKind = Object.fromEntries(OPERATION_KINDS.map((k, n) => [k, results[n]]));
    for (const kind of OPERATION_KINDS) {
      expect(byKind[kind]?.ok, kind).toBe(wrong[kind] === undefined);
    }
    const archiveError = (byKind[OperationKind.LONG_TERM_ARCHIVE] as { error: Error }).error;
    expect(archiveError).toMatchObject({
      code: OpstateErrorCode.OUTPUT_CONTRACT,
      retryable: false,
    });
    expect(archiveError.message).toContain(
      `long_term_archive operation ${ids[OperationKind.LONG_TERM_ARCHIVE]} returned without 2 outputs its kind must produce: raw_data_package ${w.pkg} (rawDataPackageId) at location ${w.archive.id} (destinationLocationId); a VERIFIED archive record of raw_data_package ${w.pkg} at location ${w.archive.id} (destinationLocationId): the operation has no archive record`,
    );
    const unpackError = (byKind[OperationKind.UNPACK] as { error: Error }).error;
    expect(unpackError).toMatchObject({ code: OpstateErrorCode.OUTPUT_CONTRACT, retryable: false });
    expect(unpackError.message).toContain(
      `unpack operation ${ids[OperationKind.UNPACK]} returned without an output its kind must produce: raw_data_package ${w.pkg2} (a member of data transfer package ${w.dtp}, dataTransferPackageId) at location ${w.buffer.id} (locationId)`,
    );
    // The refused operations did not move, and not even the package the unpack did return exists.
    expect(await store.load(ids[OperationKind.LONG_TERM_ARCHIVE])).toMatchObject({
      status: 'IN_PROGRESS',
      version: before.archive.version,
    });
    expect(await store.load(ids[OperationKind.UNPACK])).toMatchObject({
      status: 'IN_PROGRESS',
      version: before.unpack.version,
    });
    expect(await w.artifacts.findLiveCopy('raw_data_package', w.pkg, w.archive.id)).toBeUndefined();
    expect(await w.artifacts.findLiveCopy('raw_data_package', w.pkg, w.buffer.id)).toBeUndefined();

    // The same refusal through the store, and a right result after it completes.
    const counts = await tableCounts(db());
    await expect(store.complete(ids[OperationKind.LONG_TERM_ARCHIVE], 1, [])).rejects.toMatchObject(
      { code: OpstateErrorCode.OUTPUT_CONTRACT },
    );
    expect(await tableCounts(db())).toEqual(counts);
    // The copy alone is not enough either: the archive record must end with VERIFIED.
    await expect(
      store.complete(
        ids[OperationKind.LONG_TERM_ARCHIVE],
        1,
        right[OperationKind.LONG_TERM_ARCHIVE],
      ),
    ).rejects.toMatchObject({ code: OpstateErrorCode.OUTPUT_CONTRACT });
    const done = await store.complete(ids[OperationKind.LONG_TERM_ARCHIVE], 1, [
      await verifiedArchiveOutput(db(), ids[OperationKind.LONG_TERM_ARCHIVE]),
    ]);
    expect(done).toMatchObject({ alreadyCompleted: false, copiesCreated: 1 });
  });

  it("reads every input's relations in one statement: members, files, and what it belongs to", async () => {
    const store = new OperationStore(db());
    const w = await richWorld(db());
    const [packaging, archive, unpack, none] = await store.createMany([
      {
        kind: OperationKind.RAW_DATA_PACKAGE,
        fields: { rawDataPackageId: w.pkg2, locationId: w.source.id },
        inputs: w.files.map((f) => f.copy),
      },
      {
        kind: OperationKind.LONG_TERM_ARCHIVE,
        fields: {
          rawDataPackageId: w.pkg2,
          sourceLocationId: w.source.id,
          destinationLocationId: w.archive.id,
        },
        inputs: [w.pkg2Copy],
      },
      { ...inputFor(OperationKind.UNPACK, w), inputs: [w.dtpCopy] },
      inputFor(OperationKind.TRANSFER, w),
    ]);
    const names = new Map<string, string>();
    for (const r of await db().execute(
      `select id, name from raw_data_package where data_transfer_package_id = '${w.dtp}'
       union all select id, name from data_transfer_package where id = '${w.dtp}'`,
    )) {
      names.set(String(r.id), String(r.name));
    }
    const ref = (type: string, id: string) => ({ type, id, name: names.get(id) });

    const exec = counting(db());
    const files = await inputRelations(exec, packaging as string);
    expect(exec.statements).toBe(1);
    const pkg2 = ref('raw_data_package', w.pkg2);
    const [a, b] = [...w.files].sort((x, y) => x.name.localeCompare(y.name));
    expect(files).toEqual([
      {
        copyId: a?.copy,
        locationId: w.source.id,
        path: null,
        artifact: { type: 'raw_data_file', id: a?.id, name: 'a.fits' },
        partOf: pkg2,
        members: [],
      },
      {
        copyId: b?.copy,
        locationId: w.source.id,
        path: null,
        artifact: { type: 'raw_data_file', id: b?.id, name: 'b.fits' },
        partOf: pkg2,
        members: [],
      },
    ]);
    expect(await inputRelations(db(), archive as string)).toEqual([
      {
        copyId: w.pkg2Copy,
        locationId: w.source.id,
        path: null,
        artifact: pkg2,
        partOf: ref('data_transfer_package', w.dtp),
        members: [
          { type: 'raw_data_file', id: a?.id, name: 'a.fits' },
          { type: 'raw_data_file', id: b?.id, name: 'b.fits' },
        ],
      },
    ]);
    const [bundle, ...rest] = await inputRelations(db(), unpack as string);
    expect(rest).toEqual([]);
    expect(bundle).toMatchObject({
      copyId: w.dtpCopy,
      artifact: ref('data_transfer_package', w.dtp),
      partOf: null,
    });
    // Sorted by name in the database's collation; compared here as a set.
    expect(bundle?.members).toHaveLength(2);
    expect(bundle?.members).toEqual(
      expect.arrayContaining([ref('raw_data_package', w.pkg), ref('raw_data_package', w.pkg2)]),
    );
    expect(await inputRelations(db(), none as string)).toEqual([]);
  });
}
