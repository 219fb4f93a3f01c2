import { randomUUID } from 'node:crypto';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArtifactRepository, type DataLocation } from '../../persistence/ArtifactRepository.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import { MIGRATIONS_FOLDER } from '../../persistence/migrate.ts';
import type { OperationStore } from '../../persistence/OperationStore.ts';
import type { OutputCopy } from '../../persistence/OutputCopy.ts';
import type { Database } from '../../persistence/openDatabase.ts';

/** How many migrations the committed folder holds (what a fresh database applies). */
export const MIGRATIONS = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER }).length;

/** A small world per test: three locations and one package, all uniquely named. */
export interface World {
  readonly artifacts: ArtifactRepository;
  readonly source: DataLocation;
  readonly buffer: DataLocation;
  readonly archive: DataLocation;
  readonly processing: DataLocation;
  readonly dtp: string;
  readonly pkg: string;
  readonly sourceCopy: string;
}

export async function makeWorld(database: Database): Promise<World> {
  const artifacts = new ArtifactRepository(database);
  const site = `site-${randomUUID().slice(0, 8)}`;
  const loc = (name: string, locationType: LocationType) =>
    artifacts.addLocation({ site, name, locationType, storageRoot: `/data/${name}` });
  const source = await loc('source', LocationType.SOURCE);
  const buffer = await loc('buffer', LocationType.BUFFER);
  const archive = await loc('lta', LocationType.LONG_TERM_ARCHIVE);
  const processing = await loc('processing', LocationType.PROCESSING);
  const dtp = await artifacts.addDataTransferPackage({ name: `dtp-${randomUUID()}` });
  const pkg = await artifacts.addRawDataPackage({
    name: `rdp-${randomUUID()}`,
    dataTransferPackageId: dtp,
  });
  const { copy } = await artifacts.addCopy({
    artifactType: 'raw_data_package',
    artifactId: pkg,
    locationId: source.id,
  });
  return { artifacts, source, buffer, archive, processing, dtp, pkg, sourceCopy: copy.id };
}

/** A valid create request of each kind against the world. */
export function inputFor<K extends OperationKind>(kind: K, w: World): CreateOperationInput<K> {
  return INPUTS[kind](w);
}

const INPUTS: { readonly [K in OperationKind]: (w: World) => CreateOperationInput<K> } = {
  [OperationKind.RAW_DATA_PACKAGE]: (w) => ({
    kind: OperationKind.RAW_DATA_PACKAGE,
    fields: { rawDataPackageId: w.pkg, locationId: w.source.id },
  }),
  [OperationKind.DATA_TRANSFER_PACKAGE]: (w) => ({
    kind: OperationKind.DATA_TRANSFER_PACKAGE,
    fields: { dataTransferPackageId: w.dtp, locationId: w.source.id },
  }),
  [OperationKind.TRANSFER]: (w) => ({
    kind: OperationKind.TRANSFER,
    fields: {
      dataTransferPackageId: w.dtp,
      sourceLocationId: w.source.id,
      destinationLocationId: w.buffer.id,
    },
  }),
  [OperationKind.UNPACK]: (w) => ({
    kind: OperationKind.UNPACK,
    fields: { dataTransferPackageId: w.dtp, locationId: w.buffer.id },
  }),
  [OperationKind.LONG_TERM_ARCHIVE]: (w) => ({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: w.pkg,
      sourceLocationId: w.source.id,
      destinationLocationId: w.archive.id,
    },
    inputs: [w.sourceCopy],
  }),
  [OperationKind.STAGING]: (w) => ({
    kind: OperationKind.STAGING,
    fields: {
      rawDataPackageId: w.pkg,
      sourceLocationId: w.archive.id,
      destinationLocationId: w.processing.id,
    },
  }),
};

/** Row counts of every table an operation write touches, to prove a refusal wrote nothing. */
export async function tableCounts(database: Database): Promise<Record<string, number>> {
  const [row] = await database.execute(`select
    (select count(*) from operation)::int as operation,
    (select coalesce(sum(version), 0) from operation)::int as versions,
    (select count(*) from operation_transition)::int as transitions,
    (select count(*) from operation_failure_event)::int as failures,
    (select count(*) from operation_input)::int as inputs,
    (select count(*) from operation_output)::int as outputs,
    (select count(*) from physical_copy)::int as copies,
    (select count(*) from operation_tally)::int as tally,
    (select count(*) from packaging_operation)::int + (select count(*) from bundling_operation)::int
      + (select count(*) from transfer_operation)::int + (select count(*) from unpack_operation)::int
      + (select count(*) from long_term_archive_operation)::int
      + (select count(*) from staging_operation)::int as subtypes`);
  return row as Record<string, number>;
}

/**
 * Creates an operation and runs it to COMPLETED at attempt 1 by `workerId`, with `outputs`.
 *
 * @example
 * ```ts
 * const id = await completedOperation(store, inputFor(OperationKind.TRANSFER, w), outputs);
 * ```
 */
export async function completedOperation(
  store: OperationStore,
  input: CreateOperationInput,
  outputs: readonly OutputCopy[],
  workerId = 'w-1',
): Promise<string> {
  const id = await store.create(input);
  await store.apply(id, { type: 'SCHEDULE' });
  await store.apply(id, { type: 'START', attempt: 1, workerId });
  await store.complete(id, 1, outputs);
  return id;
}
