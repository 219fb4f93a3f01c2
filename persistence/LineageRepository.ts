import { sql } from 'drizzle-orm';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import { derivePackageState, type PackageState } from '../machines/packageState.ts';
import type { PhysicalCopyRecord } from './ArtifactRepository.ts';
import { toCopyRecord } from './ArtifactRepository.ts';
import type { ArtifactType } from './ArtifactType.ts';
import { checkId } from './applyEvents.ts';
import type { Database, Row } from './openDatabase.ts';
import type { ArtifactRef } from './publicRecords.ts';
import { selectPackage } from './reads/selectPackage.ts';

export type { ArtifactRef } from './publicRecords.ts';

/** An operation as lineage shows it. */
export interface OperationRef {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
}

/** A raw data file walked up to its transfer package, with every copy on the way. */
export interface FileLineage {
  readonly file: ArtifactRef;
  readonly rawDataPackage: ArtifactRef | null;
  readonly dataTransferPackage: ArtifactRef | null;
  readonly copies: readonly PhysicalCopyRecord[];
}

/** A data transfer package walked down to its raw data packages and their files (fan-out). */
export interface TransferPackageContents {
  readonly dataTransferPackage: ArtifactRef;
  readonly rawDataPackages: readonly (ArtifactRef & { readonly files: readonly ArtifactRef[] })[];
}

function ref(type: ArtifactType, id: unknown, name: unknown): ArtifactRef | null {
  return id == null ? null : { type, id: String(id), name: String(name) };
}

function toOperationRef(r: Row): OperationRef {
  return {
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    attempt: Number(r.attempt),
  };
}

/**
 * Lineage runs through artifacts and copies, never operation to operation: raw data file → raw
 * data package → data transfer package, and which operations consumed or produced each copy.
 *
 * @example
 * ```ts
 * const lineage = new LineageRepository(database);
 * const up = await lineage.ofFile(fileId);            // file → package → transfer package
 * const { producedBy } = await lineage.operationsOfCopy(copyId);
 * ```
 */
export class LineageRepository {
  constructor(private readonly database: Database) {}

  /**
   * Walks a raw data file up to its raw data package and data transfer package, with the copies
   * of all three. `undefined` when the file does not exist.
   *
   * @example
   * ```ts
   * const { rawDataPackage, dataTransferPackage } = (await lineage.ofFile(fileId))!;
   * ```
   */
  async ofFile(fileId: string): Promise<FileLineage | undefined> {
    const [r] = await this.database.execute(sql`
      select f.id as f_id, f.name as f_name, p.id as p_id, p.name as p_name,
        d.id as d_id, d.name as d_name
      from raw_data_file f
      left join raw_data_package p on p.id = f.raw_data_package_id
      left join data_transfer_package d on d.id = p.data_transfer_package_id
      where f.id = ${checkId(fileId, 'raw data file id')}::uuid`);
    if (r === undefined) return undefined;
    const ids = [r.f_id, r.p_id, r.d_id].filter((x) => x != null).map(String);
    const copies = await this.database.execute(sql`
      select * from physical_copy where artifact_id = any(${`{${ids.join(',')}}`}::uuid[])
      order by artifact_type, created_at`);
    return {
      file: ref('raw_data_file', r.f_id, r.f_name) as ArtifactRef,
      rawDataPackage: ref('raw_data_package', r.p_id, r.p_name),
      dataTransferPackage: ref('data_transfer_package', r.d_id, r.d_name),
      copies: copies.map(toCopyRecord),
    };
  }

  /**
   * Walks a data transfer package down to its raw data packages and their files.
   *
   * @example
   * ```ts
   * const contents = await lineage.contentsOf(dtpId);
   * ```
   */
  async contentsOf(dataTransferPackageId: string): Promise<TransferPackageContents | undefined> {
    const id = checkId(dataTransferPackageId, 'data transfer package id');
    const rows = await this.database.execute(sql`
      select d.id as d_id, d.name as d_name, p.id as p_id, p.name as p_name,
        f.id as f_id, f.name as f_name
      from data_transfer_package d
      left join raw_data_package p on p.data_transfer_package_id = d.id
      left join raw_data_file f on f.raw_data_package_id = p.id
      where d.id = ${id}::uuid
      order by p.name, f.name`);
    const first = rows[0];
    if (first === undefined) return undefined;
    const packages = new Map<string, ArtifactRef & { files: ArtifactRef[] }>();
    for (const r of rows) {
      if (r.p_id == null) continue;
      const key = String(r.p_id);
      let p = packages.get(key);
      if (p === undefined) {
        p = { ...(ref('raw_data_package', r.p_id, r.p_name) as ArtifactRef), files: [] };
        packages.set(key, p);
      }
      const f = ref('raw_data_file', r.f_id, r.f_name);
      if (f !== null) p.files.push(f);
    }
    return {
      dataTransferPackage: ref('data_transfer_package', first.d_id, first.d_name) as ArtifactRef,
      rawDataPackages: [...packages.values()],
    };
  }

  /**
   * Which operations consumed a copy (`operation_input`) and which produced it
   * (`operation_output`).
   *
   * @example
   * ```ts
   * const { consumedBy, producedBy } = await lineage.operationsOfCopy(copyId);
   * ```
   */
  async operationsOfCopy(
    copyId: string,
  ): Promise<{ consumedBy: OperationRef[]; producedBy: OperationRef[] }> {
    const id = checkId(copyId, 'physical copy id');
    const rows = await this.database.execute(sql`
      select 'in' as role, o.id, o.kind, o.status, o.attempt from operation_input i
        join operation o on o.id = i.operation_id where i.physical_copy_id = ${id}::uuid
      union all
      select 'out' as role, o.id, o.kind, o.status, o.attempt from operation_output x
        join operation o on o.id = x.operation_id where x.physical_copy_id = ${id}::uuid`);
    return {
      consumedBy: rows.filter((r) => r.role === 'in').map(toOperationRef),
      producedBy: rows.filter((r) => r.role === 'out').map(toOperationRef),
    };
  }

  /**
   * The operations that work on a raw data package: its packaging, archive and staging, and the
   * bundling, transfer and unpack of the transfer package it travels in.
   *
   * @example
   * ```ts
   * const ops = await lineage.operationsOfPackage(pkg);
   * ```
   */
  async operationsOfPackage(rawDataPackageId: string): Promise<OperationRef[]> {
    const id = checkId(rawDataPackageId, 'raw data package id');
    const rows = await this.database.execute(sql`
      with p as (select id, data_transfer_package_id as dtp from raw_data_package where id = ${id}::uuid),
      ids as (
        select operation_id from packaging_operation where raw_data_package_id = ${id}::uuid
        union all select operation_id from long_term_archive_operation where raw_data_package_id = ${id}::uuid
        union all select operation_id from staging_operation where raw_data_package_id = ${id}::uuid
        union all select operation_id from bundling_operation where data_transfer_package_id = (select dtp from p)
        union all select operation_id from transfer_operation where data_transfer_package_id = (select dtp from p)
        union all select operation_id from unpack_operation where data_transfer_package_id = (select dtp from p)
      )
      select o.id, o.kind, o.status, o.attempt from operation o join ids on ids.operation_id = o.id
      order by o.created_at`);
    return rows.map(toOperationRef);
  }

  /**
   * A raw data package's or data transfer package's lifecycle state, derived from its family's
   * operations and copies (`selectPackage`, `derivePackageState`); never stored. `NOT_FOUND` when
   * no package has that id.
   *
   * @example
   * ```ts
   * await lineage.packageState(pkg); // 'ARCHIVING'
   * ```
   */
  async packageState(packageId: string): Promise<PackageState> {
    const found = await selectPackage(this.database, packageId);
    if (found === undefined) {
      throw new OpstateError(OpstateErrorCode.NOT_FOUND, `no package has id ${packageId}`);
    }
    return derivePackageState(found.facts);
  }
}
