import { sql } from 'drizzle-orm';
import { OPERATOR } from '../machines/actors.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { PhysicalCopyStatus } from '../machines/physicalCopyMachine.ts';
import { submitterProblem } from '../machines/submitter.ts';
import type { ArtifactType } from './ArtifactType.ts';
import { checkId } from './applyEvents.ts';
import {
  type DataLocation,
  dataTransferPackageRegistration,
  locationRegistration,
  type NewDataTransferPackage,
  type NewRawDataFile,
  type NewRawDataPackage,
  rawDataFileRegistration,
  rawDataPackageRegistration,
  toLocation,
} from './artifactRegistrations.ts';
import { findOrInsert, insertRegistration } from './findOrInsert.ts';
import { toDate } from './OperationRecord.ts';
import { type OutputCopy, toOutputInserts } from './OutputCopy.ts';
import type { Database, Row } from './openDatabase.ts';
import type { PhysicalCopyRecord } from './publicRecords.ts';
import { filePresentAt } from './sql/filePresentAt.ts';

export type { PhysicalCopyRecord } from './publicRecords.ts';

export type { DataLocation, NewDataTransferPackage, NewRawDataFile, NewRawDataPackage };

/** A copy to register: the same shape as a copy an operation outputs. */
export type NewCopy = OutputCopy;

function badInput(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message);
}

function shownFact(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return 'unset';
  return typeof value === 'number' ? String(value) : `'${value}'`;
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
   * Registers a location; `CONFLICT` when (site, name) exists, naming the location that is there.
   *
   * @example
   * ```ts
   * await artifacts.addLocation({ site: 's', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE, storageRoot: 's3://b' });
   * ```
   */
  async addLocation(input: Omit<DataLocation, 'id'>): Promise<DataLocation> {
    return toLocation(await insertRegistration(this.database, locationRegistration(input)));
  }

  /**
   * The location at (site, name), registered first when there is none, so setup code can run
   * again: the existing one comes back when its type and storage root are the ones given, else
   * `CONFLICT` names each that differs. Safe against concurrent callers.
   *
   * @example
   * ```ts
   * const lta = await artifacts.findOrAddLocation({ site: 'cologne', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE, storageRoot: 's3://lta' });
   * ```
   */
  async findOrAddLocation(input: Omit<DataLocation, 'id'>): Promise<DataLocation> {
    return toLocation((await findOrInsert(this.database, locationRegistration(input))).row);
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
    return r === undefined ? undefined : toLocation(r);
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
    return rows.map(toLocation);
  }

  /**
   * Registers a data transfer package; returns its id. `CONFLICT` when one of that name exists,
   * naming it.
   *
   * @example
   * ```ts
   * const dtp = await artifacts.addDataTransferPackage({ name: 'dtp-7' });
   * ```
   */
  async addDataTransferPackage(input: NewDataTransferPackage): Promise<string> {
    const row = await insertRegistration(this.database, dataTransferPackageRegistration(input));
    return String(row.id);
  }

  /**
   * The id of the data transfer package of that name, registered first when there is none; the
   * existing one when the checksum and size given (if any) are its own, else `CONFLICT` names
   * each that differs.
   *
   * @example
   * ```ts
   * const dtp = await artifacts.findOrAddDataTransferPackage({ name: 'dtp-7' });
   * ```
   */
  async findOrAddDataTransferPackage(input: NewDataTransferPackage): Promise<string> {
    const { row } = await findOrInsert(this.database, dataTransferPackageRegistration(input));
    return String(row.id);
  }

  /**
   * Registers a raw data package, optionally already bundled into a data transfer package.
   * `CONFLICT` when one of that name exists, naming it.
   *
   * @example
   * ```ts
   * const pkg = await artifacts.addRawDataPackage({ name: 'obs-1', dataTransferPackageId: dtp });
   * ```
   */
  async addRawDataPackage(input: NewRawDataPackage): Promise<string> {
    const row = await insertRegistration(this.database, rawDataPackageRegistration(input));
    return String(row.id);
  }

  /**
   * The id of the raw data package of that name, registered first when there is none; the
   * existing one when the data transfer package, checksum and size given (if any) are its own,
   * else `CONFLICT` names each that differs.
   *
   * @example
   * ```ts
   * const pkg = await artifacts.findOrAddRawDataPackage({ name: 'obs-1', dataTransferPackageId: dtp });
   * ```
   */
  async findOrAddRawDataPackage(input: NewRawDataPackage): Promise<string> {
    const { row } = await findOrInsert(this.database, rawDataPackageRegistration(input));
    return String(row.id);
  }

  /**
   * Registers a raw data file, optionally already in a raw data package.
   *
   * @example
   * ```ts
   * const file = await artifacts.addRawDataFile({ name: 'scan_0001.fits', rawDataPackageId: pkg, size: 1024 });
   * ```
   */
  async addRawDataFile(input: NewRawDataFile): Promise<string> {
    const row = await insertRegistration(this.database, rawDataFileRegistration(input));
    return String(row.id);
  }

  /**
   * The id of the file of that name in that raw data package, registered first when there is
   * none; the existing one when the checksum and size given (if any) are its own, else
   * `CONFLICT` names each that differs. A file is found by its package and name, so
   * `rawDataPackageId` is required (`BAD_INPUT` without it).
   *
   * @example
   * ```ts
   * const file = await artifacts.findOrAddRawDataFile({ name: 'scan_0001.fits', rawDataPackageId: pkg, checksum });
   * ```
   */
  async findOrAddRawDataFile(input: NewRawDataFile): Promise<string> {
    const { row } = await findOrInsert(this.database, rawDataFileRegistration(input, true));
    return String(row.id);
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
   * Declares that every file of a raw data package is registered, each with a PRESENT copy at
   * `locationId`: the fact a declared pipeline's entry stage (its packaging, at that location)
   * is created from by the control plane's pass, once. Declared once per package: again at the
   * same location it is a no-op (`declared: false`), at another `CONFLICT`. Refused with nothing
   * written: a package or location that does not exist (`NOT_FOUND`), a package with no files, a
   * file with no PRESENT copy at the location (`BAD_INPUT`, naming the file), a bad `by`.
   *
   * @example
   * ```ts
   * await artifacts.declareFilesComplete({ rawDataPackageId: pkg, locationId: source.id });
   * ```
   */
  async declareFilesComplete(input: {
    readonly rawDataPackageId: string;
    readonly locationId: string;
    readonly by?: string;
  }): Promise<{ readonly declared: boolean; readonly files: number }> {
    const pkg = checkId(input.rawDataPackageId, 'rawDataPackageId');
    const at = checkId(input.locationId, 'locationId');
    const by = input.by ?? OPERATOR;
    const problem = submitterProblem(by);
    if (problem !== undefined) throw badInput(`by ${problem}`);
    return this.database.transaction(async (tx) => {
      const [found] = await tx.execute(sql`
        select (select name from raw_data_package where id = ${pkg}::uuid for share) as package,
          (select site || '/' || name from data_location where id = ${at}::uuid) as location`);
      if (found?.package == null || found.location == null) {
        const what = found?.package == null ? `raw data package ${pkg}` : `location ${at}`;
        throw new OpstateError(OpstateErrorCode.NOT_FOUND, `no ${what} is registered`, {
          details: { rawDataPackageId: pkg, locationId: at },
        });
      }
      const files = await tx.execute(sql`
        select f.id::text, f.name, ${filePresentAt(sql`${at}::uuid`)} as present
        from raw_data_file f where f.raw_data_package_id = ${pkg}::uuid order by f.id`);
      if (files.length === 0) {
        throw badInput(
          `raw data package ${found.package} has no files; assign its files (assignFiles) before declaring them complete`,
        );
      }
      const missing = files.find((f) => f.present !== true);
      if (missing !== undefined) {
        throw badInput(
          `file ${String(missing.name)} (${String(missing.id)}) of raw data package ${found.package} has no PRESENT copy at ${found.location}; register its copy there first`,
        );
      }
      const inserted = await tx.execute(sql`
        insert into package_files_complete (raw_data_package_id, location_id, declared_by)
        values (${pkg}::uuid, ${at}::uuid, ${by})
        on conflict (raw_data_package_id) do nothing
        returning raw_data_package_id`);
      if (inserted.length === 0) {
        const [earlier] = await tx.execute(sql`
          select location_id::text from package_files_complete
          where raw_data_package_id = ${pkg}::uuid`);
        if (String(earlier?.location_id) !== at) {
          throw new OpstateError(
            OpstateErrorCode.CONFLICT,
            `raw data package ${found.package}'s files were declared complete at location ${String(earlier?.location_id)} already`,
            { details: { rawDataPackageId: pkg, locationId: at } },
          );
        }
      }
      return { declared: inserted.length > 0, files: files.length };
    });
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
   * The live copy of that artifact at that location, recorded first when there is none (as
   * `addCopy` does); when one is there, it comes back only if the path, checksum and size given
   * (if any) are its own, else `CONFLICT` names each that differs.
   *
   * @example
   * ```ts
   * const { copy } = await artifacts.findOrAddCopy({ artifactType: 'raw_data_file', artifactId: file, locationId: src.id, path, checksum });
   * ```
   */
  async findOrAddCopy(input: NewCopy): Promise<{ copy: PhysicalCopyRecord; created: boolean }> {
    const added = await this.addCopy(input);
    if (added.created) return added;
    const { copy } = added;
    const differing = (['path', 'checksum', 'size'] as const).filter(
      (key) => input[key] !== undefined && input[key] !== copy[key],
    );
    if (differing.length > 0) {
      const what = differing
        .map((key) => `its ${key} is ${shownFact(copy[key])}, not ${shownFact(input[key])}`)
        .join('; ');
      throw new OpstateError(
        OpstateErrorCode.CONFLICT,
        `a live copy of ${copy.artifactType} ${copy.artifactId} at location ${copy.locationId} already exists (id ${copy.id}) with other attributes: ${what}; give the attributes it has to reuse it`,
        { details: { id: copy.id, differing, existing: copy } },
      );
    }
    return added;
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
