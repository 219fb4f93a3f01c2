import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { isLocationType, type LocationType, routeNameProblem } from '../machines/routing.ts';
import { checkId } from './applyEvents.ts';
import type { Registration } from './findOrInsert.ts';
import type { Row } from './openDatabase.ts';
import type {
  DataLocation,
  NewDataTransferPackage,
  NewRawDataFile,
  NewRawDataPackage,
} from './publicRecords.ts';

export type {
  DataLocation,
  NewDataTransferPackage,
  NewRawDataFile,
  NewRawDataPackage,
} from './publicRecords.ts';

function badInput(message: string): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message);
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw badInput(`${what} must be a non-empty string`);
  }
  return value;
}

function optionalText(value: unknown, what: string): string | undefined {
  return value === undefined || value === null ? undefined : text(value, what);
}

function optionalSize(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw badInput('size must be a whole number ≥ 0');
  }
  return value as number;
}

const optionalId = (value: string | undefined, what: string) =>
  value === undefined ? undefined : checkId(value, what);

/**
 * The location registration, its input checked (`BAD_INPUT` for a type that is not a
 * `LocationType`, an empty root, or a site or name that cannot name a queue: `routeNameProblem`);
 * its natural key is (site, name).
 *
 * @example
 * ```ts
 * await findOrInsert(database, locationRegistration({ site, name, locationType, storageRoot }));
 * ```
 */
export function locationRegistration(input: Omit<DataLocation, 'id'>): Registration {
  if (!isLocationType(input.locationType)) {
    throw badInput(`locationType ${JSON.stringify(input.locationType)} is not a LocationType`);
  }
  const site = text(input.site, 'site');
  const name = text(input.name, 'name');
  const problem = routeNameProblem('site', site) ?? routeNameProblem('location', name);
  if (problem !== undefined) throw badInput(problem);
  return {
    what: 'location',
    named: `${site}/${name}`,
    table: 'data_location',
    key: [
      { column: 'site', name: 'site', value: site },
      { column: 'name', name: 'name', value: name },
    ],
    attributes: [
      { column: 'location_type', name: 'locationType', value: input.locationType },
      {
        column: 'storage_root',
        name: 'storageRoot',
        value: text(input.storageRoot, 'storageRoot'),
      },
    ],
    unique: true,
    findOrAdd: 'findOrAddLocation',
  };
}

/**
 * The location a row holds.
 *
 * @example
 * ```ts
 * const location = toLocation(row);
 * ```
 */
export function toLocation(r: Row): DataLocation {
  return {
    id: String(r.id),
    site: String(r.site),
    name: String(r.name),
    locationType: r.location_type as LocationType,
    storageRoot: String(r.storage_root),
  };
}

const facts = (input: { checksum?: string; size?: number }) =>
  [
    { column: 'checksum', name: 'checksum', value: optionalText(input.checksum, 'checksum') },
    { column: 'size', name: 'size', value: optionalSize(input.size), cast: 'bigint' },
  ] as const;

/**
 * The raw data package registration; its natural key is its name (unique).
 *
 * @example
 * ```ts
 * await findOrInsert(database, rawDataPackageRegistration({ name: 'obs-1' }));
 * ```
 */
export function rawDataPackageRegistration(input: NewRawDataPackage): Registration {
  const name = text(input.name, 'name');
  return {
    what: 'raw data package',
    named: name,
    table: 'raw_data_package',
    key: [{ column: 'name', name: 'name', value: name }],
    attributes: [
      {
        column: 'data_transfer_package_id',
        name: 'dataTransferPackageId',
        value: optionalId(input.dataTransferPackageId, 'dataTransferPackageId'),
        cast: 'uuid',
      },
      ...facts(input),
    ],
    unique: true,
    findOrAdd: 'findOrAddRawDataPackage',
  };
}

/**
 * The data transfer package registration; its natural key is its name (unique).
 *
 * @example
 * ```ts
 * await findOrInsert(database, dataTransferPackageRegistration({ name: 'dtp-7' }));
 * ```
 */
export function dataTransferPackageRegistration(input: NewDataTransferPackage): Registration {
  const name = text(input.name, 'name');
  return {
    what: 'data transfer package',
    named: name,
    table: 'data_transfer_package',
    key: [{ column: 'name', name: 'name', value: name }],
    attributes: [...facts(input)],
    unique: true,
    findOrAdd: 'findOrAddDataTransferPackage',
  };
}

/**
 * The raw data file registration. Files of one name are many (every night's `scan_0001.fits`):
 * a file is found by its package and its name, so `findOrAdd` needs `rawDataPackageId`.
 *
 * @example
 * ```ts
 * await findOrInsert(database, rawDataFileRegistration({ name: 'scan_0001.fits', rawDataPackageId: pkg }, true));
 * ```
 */
export function rawDataFileRegistration(input: NewRawDataFile, findOrAdd = false): Registration {
  const name = text(input.name, 'name');
  const pkg = optionalId(input.rawDataPackageId, 'rawDataPackageId');
  if (findOrAdd && pkg === undefined) {
    throw badInput(
      `raw data file ${name}: findOrAddRawDataFile finds a file by its package and name; give rawDataPackageId, or register a file outside any package with addRawDataFile`,
    );
  }
  return {
    what: 'raw data file',
    named: pkg === undefined ? name : `${name} of package ${pkg}`,
    table: 'raw_data_file',
    key: [
      { column: 'raw_data_package_id', name: 'rawDataPackageId', value: pkg, cast: 'uuid' },
      { column: 'name', name: 'name', value: name },
    ],
    attributes: [...facts(input)],
    unique: false,
    findOrAdd: 'findOrAddRawDataFile',
  };
}
