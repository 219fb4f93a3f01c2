import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type {
  PackageCopy,
  PackageOperation,
  PackageStateFacts,
  PackageType,
} from '../../machines/packageState.ts';
import type { Executor } from '../openDatabase.ts';
import { familyOperations, uuidArray } from '../sql/familyOperations.ts';

/** One package of a page: its name and the facts its state is derived from. */
export interface PackageStateRow {
  readonly name: string;
  readonly facts: PackageStateFacts;
}

/** Packages per page when many are derived (each page is four statements). */
export const PACKAGE_PAGE_SIZE = 1_000;

/**
 * A page of packages of one type in id order after `after`, each with the facts its state is
 * derived from (`derivePackageState`): the operations on its family that move it (no staging)
 * and, of its member packages' copies, the ones the state reads: each completed archive's live
 * copy at its archive location. Four statements whatever the page holds, each a range of an index
 * (the packages' primary key, the packages by transfer package, the subtypes' artifact indexes,
 * the copies' live key), so deriving every package costs what the packages hold.
 *
 * @example
 * ```ts
 * const page = await selectPackageStatePage(database, 'raw_data_package', null, 1000);
 * page.map((p) => derivePackageState(p.facts));
 * ```
 */
export async function selectPackageStatePage(
  exec: Executor,
  type: PackageType,
  after: string | null,
  limit: number = PACKAGE_PAGE_SIZE,
): Promise<PackageStateRow[]> {
  const from = after === null ? sql`` : sql`where id > ${after}::uuid`;
  const heads =
    type === 'raw_data_package'
      ? await exec.execute(sql`select id, name, data_transfer_package_id as dtp
          from raw_data_package ${from} order by id limit ${limit}`)
      : await exec.execute(sql`select id, name, id as dtp
          from data_transfer_package ${from} order by id limit ${limit}`);
  if (heads.length === 0) return [];
  const bundles = [...new Set(heads.filter((h) => h.dtp != null).map((h) => String(h.dtp)))];
  const membersOf = new Map<string, string[]>();
  if (type === 'raw_data_package') {
    for (const h of heads) membersOf.set(String(h.id), [String(h.id)]);
  } else {
    for (const b of bundles) membersOf.set(b, []);
    const rows = await exec.execute(sql`select id, data_transfer_package_id as dtp
      from raw_data_package where data_transfer_package_id = any(${uuidArray(bundles)}) order by id`);
    for (const r of rows) membersOf.get(String(r.dtp))?.push(String(r.id));
  }
  const packages = [...membersOf.values()].flat();
  const [ops, copies] = await Promise.all([
    exec.execute(sql`
      select s.subject, o.id, o.kind, o.status, o.target_location_id
      from ${familyOperations(packages, bundles, { staging: false })} s
      join operation o on o.id = s.operation_id and o.superseded_by is null`),
    // The only copies the state reads: each completed archive's copy at its archive location.
    exec.execute(sql`select c.artifact_id, c.location_id, c.status
      from long_term_archive_operation a
      join operation o on o.id = a.operation_id and o.status = 'COMPLETED'
        and o.superseded_by is null
      join physical_copy c on c.artifact_type = 'raw_data_package'
        and c.artifact_id = a.raw_data_package_id and c.location_id = o.target_location_id
        and c.status <> 'DELETED'
      where a.raw_data_package_id = any(${uuidArray(packages)})`),
  ]);
  const bySubject = new Map<string, PackageOperation[]>();
  for (const r of ops) {
    const list = bySubject.get(String(r.subject)) ?? [];
    list.push({
      id: String(r.id),
      kind: r.kind as OperationKind,
      status: r.status as OperationStatus,
      subjectId: String(r.subject),
      targetLocationId: r.target_location_id == null ? null : String(r.target_location_id),
    });
    bySubject.set(String(r.subject), list);
  }
  const copiesOf = new Map<string, PackageCopy[]>();
  for (const r of copies) {
    const list = copiesOf.get(String(r.artifact_id)) ?? [];
    list.push({
      artifactId: String(r.artifact_id),
      locationId: String(r.location_id),
      status: String(r.status),
    });
    copiesOf.set(String(r.artifact_id), list);
  }
  return heads.map((h) => {
    const id = String(h.id);
    const dtp = h.dtp == null ? null : String(h.dtp);
    const members = membersOf.get(type === 'raw_data_package' ? id : (dtp as string)) ?? [];
    const subjects = dtp === null ? members : [...members, dtp];
    return {
      name: String(h.name),
      facts: {
        type,
        id,
        members,
        transferPackageId: dtp,
        operations: subjects.flatMap((s) => bySubject.get(s) ?? []),
        copies: members.flatMap((m) => copiesOf.get(m) ?? []),
      },
    };
  });
}
