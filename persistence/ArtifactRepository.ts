import { sql } from 'drizzle-orm';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import { isLocationType, type LocationType } from '../machines/routing.ts';
import type { ArtifactType } from './ArtifactType.ts';
import { checkId } from './applyEvents.ts';
import { toDate } from './OperationRecord.ts';
import { type OutputCopy, toOutputInserts } from './OutputCopy.ts';
import type { Database, Row } from './openDatabase.ts';

export interface DataLocation {
  readonly id: string;
  readonly site: string;
  readonly name: string;
  readonly locationType: LocationType;
  readonly storageRoot: string;
}

export interface PhysicalCopyRecord {
  readonly id: string;
  readonly artifactType: ArtifactType;
  readonly artifactId: string;
  readonly locationId: string;
  readonly status: PhysicalCopyStatus;
  readonly path: string | null;
  readonly checksum: string | null;
  readonly size: number | null;
  readonly deletionFailureCount: number;
  readonly lastError: string | null;
  /** Compare-and-set counter of the copy's status (see `CopyLifecycle`). */
  readonly version: number;
  readonly createdAt: Date;
}

/** A copy to register: the same shape as a copy an operation outputs. */
export type NewCopy = OutputCopy;

function badInput(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message);
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0)
    throw badInput(`${what} must be a non-empty string`);
  return value;
}

function optionalSize(value: unknown): number | null {
  if (value === undefined || value === null) return null;
  if (!Number.isSafeInteger(value) || (value as number) < 0)
    throw badInput('size must be a whole number ≥ 0');
  return value as number;
}

export function toCopyRecord(r: Row): PhysicalCopyRecord {
  return {
    id: String(r.id),
    artifactType: r.artifact_type as ArtifactType,
    artifactId: String(r.artifact_id),
    locationId: String(r.location_id),
    status: r.status as PhysicalCopyStatus,
    path: r.path == null ? null : String(r.path),
    checksum: r.checksum == null ? null : String(r.checksum),
    size: r.size == null ? null : Number(r.size),
    deletionFailureCount: Number(r.deletion_failure_count),
    lastError: r.last_error == null ? null : String(r.last_error),
    version: Number(r.version ?? 0),
    createdAt: toDate(r.created_at) as Date,
  };
}

/**
 * Registers the things operations work on — locations, raw data files, raw data packages, data
 * transfer packages — and their physical copies. The runtime hands this to stage services.
 *
 * @example
 * ```ts
 * const artifacts = new ArtifactRepository(database);
 * const site = await artifacts.addLocation({ site: 'cologne', name: 'buffer', locationType: LocationType.BUFFER, storageRoot: '/data' });
 * const pkg = await artifacts.addRawDataPackage({ name: 'obs-2024-001' });
 * const copy = await artifacts.addCopy({ artifactType: 'raw_data_package', artifactId: pkg, locationId: site.id });
 * ```
 */
export class ArtifactRepository {
  constructor(private readonly database: Database) {}

  /**
   * Registers a location; `CONFLICT` when (site, name) exists.
   *
   * @example
   * ```ts
   * await artifacts.addLocation({ site: 's', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE, storageRoot: 's3://b' });
   * ```
   */
  async addLocation(input: Omit<DataLocation, 'id'>): Promise<DataLocation> {
    if (!isLocationType(input.locationType)) {
      throw badInput(`locationType ${JSON.stringify(input.locationType)} is not a LocationType`);
    }
    const [row] = await this.database.execute(sql`
      insert into data_location (site, name, location_type, storage_root)
      values (${text(input.site, 'site')}, ${text(input.name, 'name')}, ${input.locationType},
        ${text(input.storageRoot, 'storageRoot')})
      returning id`);
    return { ...input, id: String(row?.id) };
  }

  /**
   * Finds a location by site and name.
   *
   * @example
   * ```ts
   * const lta = await artifacts.findLocation('cologne', 'lta');
   * ```
   */
  async findLocation(site: string, name: string): Promise<DataLocation | undefined> {
    const [r] = await this.database.execute(
      sql`select id, site, name, location_type, storage_root from data_location
          where site = ${site} and name = ${name}`,
    );
    return r === undefined
      ? undefined
      : {
          id: String(r.id),
          site: String(r.site),
          name: String(r.name),
          locationType: r.location_type as LocationType,
          storageRoot: String(r.storage_root),
        };
  }

  /**
   * The locations with these ids (unknown ids are left out).
   *
   * @example
   * ```ts
   * const [lta] = await artifacts.locationsById([archiveId]);
   * ```
   */
  async locationsById(ids: readonly string[]): Promise<DataLocation[]> {
    for (const id of ids) checkId(id);
    if (ids.length === 0) return [];
    const rows = await this.database.execute(
      sql`select id, site, name, location_type, storage_root from data_location
          where id in (${sql.join(
            ids.map((id) => sql`${id}::uuid`),
            sql`, `,
          )})`,
    );
    return rows.map((r) => ({
      id: String(r.id),
      site: String(r.site),
      name: String(r.name),
      locationType: r.location_type as LocationType,
      storageRoot: String(r.storage_root),
    }));
  }

  /**
   * Registers a data transfer package; returns its id.
   *
   * @example
   * ```ts
   * const dtp = await artifacts.addDataTransferPackage({ name: 'dtp-7' });
   * ```
   */
  async addDataTransferPackage(input: {
    name: string;
    checksum?: string;
    size?: number;
  }): Promise<string> {
    const [row] = await this.database.execute(sql`
      insert into data_transfer_package (name, checksum, size)
      values (${text(input.name, 'name')}, ${input.checksum ?? null}, ${optionalSize(input.size)})
      returning id`);
    return String(row?.id);
  }

  /**
   * Registers a raw data package, optionally already bundled into a data transfer package.
   *
   * @example
   * ```ts
   * const pkg = await artifacts.addRawDataPackage({ name: 'obs-1', dataTransferPackageId: dtp });
   * ```
   */
  async addRawDataPackage(input: {
    name: string;
    dataTransferPackageId?: string;
    checksum?: string;
    size?: number;
  }): Promise<string> {
    const dtp =
      input.dataTransferPackageId === undefined
        ? null
        : checkId(input.dataTransferPackageId, 'dataTransferPackageId');
    const [row] = await this.database.execute(sql`
      insert into raw_data_package (name, data_transfer_package_id, checksum, size)
      values (${text(input.name, 'name')}, ${dtp}::uuid, ${input.checksum ?? null},
        ${optionalSize(input.size)})
      returning id`);
    return String(row?.id);
  }

  /**
   * Registers a raw data file, optionally already in a raw data package.
   *
   * @example
   * ```ts
   * const file = await artifacts.addRawDataFile({ name: 'scan_0001.fits', rawDataPackageId: pkg, size: 1024 });
   * ```
   */
  async addRawDataFile(input: {
    name: string;
    rawDataPackageId?: string;
    checksum?: string;
    size?: number;
  }): Promise<string> {
    const pkg =
      input.rawDataPackageId === undefined
        ? null
        : checkId(input.rawDataPackageId, 'rawDataPackageId');
    const [row] = await this.database.execute(sql`
      insert into raw_data_file (name, raw_data_package_id, checksum, size)
      values (${text(input.name, 'name')}, ${pkg}::uuid, ${input.checksum ?? null},
        ${optionalSize(input.size)})
      returning id`);
    return String(row?.id);
  }

  /**
   * Puts raw data files into a raw data package (packaging's fan-in), or raw data packages into a
   * data transfer package (bundling's), in one statement.
   *
   * @example
   * ```ts
   * await artifacts.assignFiles(pkg, fileIds);
   * ```
   */
  async assignFiles(rawDataPackageId: string, fileIds: readonly string[]): Promise<void> {
    const ids = fileIds.map((id) => checkId(id, 'raw data file id'));
    await this.database.execute(sql`
      update raw_data_file set raw_data_package_id = ${checkId(rawDataPackageId, 'rawDataPackageId')}::uuid
      where id = any(${`{${ids.join(',')}}`}::uuid[])`);
  }

  /**
   * @example
   * ```ts
   * await artifacts.assignPackages(dtp, packageIds);
   * ```
   */
  async assignPackages(
    dataTransferPackageId: string,
    packageIds: readonly string[],
  ): Promise<void> {
    const ids = packageIds.map((id) => checkId(id, 'raw data package id'));
    await this.database.execute(sql`
      update raw_data_package set data_transfer_package_id = ${checkId(dataTransferPackageId, 'dataTransferPackageId')}::uuid
      where id = any(${`{${ids.join(',')}}`}::uuid[])`);
  }

  /**
   * Records a live copy (base + artifact subtype row, one statement). When a live copy of that
   * artifact is already at that location, returns it with `created: false` instead of making a
   * second one.
   *
   * @example
   * ```ts
   * const { copy, created } = await artifacts.addCopy({ artifactType: 'raw_data_file', artifactId: file, locationId: src.id });
   * ```
   */
  async addCopy(input: NewCopy): Promise<{ copy: PhysicalCopyRecord; created: boolean }> {
    const [c] = toOutputInserts('-', [input]);
    if (c === undefined) throw badInput('no copy given');
    const rows = await this.database.execute(sql`
      with c as (
        insert into physical_copy (artifact_type, artifact_id, location_id, path, checksum, size)
        values (${c.artifact_type}, ${c.artifact_id}::uuid, ${c.location_id}::uuid, ${c.path},
          ${c.checksum}, ${c.size}::bigint)
        on conflict (artifact_type, artifact_id, location_id) where status <> 'DELETED' do nothing
        returning *
      ),
      s1 as (insert into raw_data_file_physical_copy (physical_copy_id, raw_data_file_id)
             select id, artifact_id from c where artifact_type = 'raw_data_file'),
      s2 as (insert into raw_data_package_physical_copy (physical_copy_id, raw_data_package_id)
             select id, artifact_id from c where artifact_type = 'raw_data_package'),
      s3 as (insert into data_transfer_package_physical_copy (physical_copy_id, data_transfer_package_id)
             select id, artifact_id from c where artifact_type = 'data_transfer_package')
      select c.*, true as created from c`);
    const row = rows[0];
    if (row !== undefined) return { copy: toCopyRecord(row), created: true };
    const existing = await this.findLiveCopy(
      c.artifact_type as ArtifactType,
      c.artifact_id,
      c.location_id,
    );
    if (existing === undefined) {
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        'a concurrent writer changed this copy; try again',
        {
          retryable: true,
        },
      );
    }
    return { copy: existing, created: false };
  }

  /**
   * The live (not DELETED) copy of an artifact at a location, if any.
   *
   * @example
   * ```ts
   * if (await artifacts.findLiveCopy('raw_data_package', pkg, lta.id)) return; // already archived
   * ```
   */
  async findLiveCopy(
    artifactType: ArtifactType,
    artifactId: string,
    locationId: string,
  ): Promise<PhysicalCopyRecord | undefined> {
    const [r] = await this.database.execute(sql`
      select * from physical_copy
      where artifact_type = ${artifactType} and artifact_id = ${checkId(artifactId, 'artifactId')}::uuid
        and location_id = ${checkId(locationId, 'locationId')}::uuid and status <> 'DELETED'`);
    return r === undefined ? undefined : toCopyRecord(r);
  }

  /**
   * Every copy of an artifact (all locations, all statuses).
   *
   * @example
   * ```ts
   * const copies = await artifacts.copiesOf('raw_data_package', pkg);
   * ```
   */
  async copiesOf(artifactType: ArtifactType, artifactId: string): Promise<PhysicalCopyRecord[]> {
    const rows = await this.database.execute(sql`
      select * from physical_copy
      where artifact_type = ${artifactType} and artifact_id = ${checkId(artifactId, 'artifactId')}::uuid
      order by created_at`);
    return rows.map(toCopyRecord);
  }
}
