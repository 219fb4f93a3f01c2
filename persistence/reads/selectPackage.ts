import { sql } from 'drizzle-orm';
import type { CircuitState } from '../../machines/circuitBreaker.ts';
import type { PackageFacts, PackageOperationFact } from '../../machines/classifyPackageStep.ts';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { PackageCopy, PackageType } from '../../machines/packageState.ts';
import { checkId } from '../applyEvents.ts';
import { toDate } from '../OperationRecord.ts';
import type { Database, Executor, Row } from '../openDatabase.ts';
import { familyOperations, uuidArray } from '../sql/familyOperations.ts';

/** A copy of a package of the family, as a package's page lists it. */
export interface PackageCopyRow extends PackageCopy {
  readonly id: string;
  readonly artifactType: string;
  /** `site/name` of its location. */
  readonly location: string;
  readonly path: string | null;
}

/** One package with its whole family: what its state and step are derived from, and its lineage. */
export interface PackageRecord {
  readonly facts: PackageFacts;
  readonly name: string;
  /** The family's copies (the same ones `facts.copies` holds), with where each is. */
  readonly copies: readonly PackageCopyRow[];
  /** Its data transfer package (itself for one), or null before it is assigned one. */
  readonly transferPackage: { readonly id: string; readonly name: string } | null;
  /** The raw data packages of its transfer package (for a raw data package: its siblings too). */
  readonly members: readonly {
    readonly id: string;
    readonly name: string;
    readonly packaged: boolean;
  }[];
  /** The raw data files of its member packages (the first `FILES_SHOWN`), and how many there are. */
  readonly files: readonly {
    readonly id: string;
    readonly name: string;
    readonly rawDataPackageId: string;
  }[];
  readonly filesTotal: number;
  /**
   * The rollbacks of the package or its transfer package, oldest first. The operations they
   * superseded are left out of `facts` (the state is derived from what runs now).
   */
  readonly rollbacks: readonly {
    readonly id: string;
    readonly artifactId: string;
    readonly stage: string;
    readonly requestedBy: string;
    readonly at: Date;
    /** How many operations it superseded. */
    readonly redone: number;
  }[];
}

/** Files listed per package page; the rest are counted. */
export const FILES_SHOWN = 200;

const KINDS = sql.raw(`array[${OPERATION_KINDS.map((k) => `'${k}'`).join(', ')}]::text[]`);

/** The family's operations with what says why each waits: breaker, fullest flow limit, completion. */
async function operationsOf(
  exec: Executor,
  packages: readonly string[],
  bundles: readonly string[],
): Promise<PackageOperationFact[]> {
  const rows = await exec.execute(sql`
    select o.id, o.kind, o.status, s.subject, o.target_location_id, l.site, l.name, o.attempt,
      o.worker_id, o.not_before, o.status_changed_at, o.last_error->>'message' as error_message,
      o.last_error->>'code' as error_code, b.state as breaker, fl.max_live, fl.live,
      case when o.status = 'COMPLETED' then (select max(t.id) from operation_transition t
        where t.operation_id = o.id and t.to_status = 'COMPLETED') end as completed_transition
    from ${familyOperations(packages, bundles, { staging: true })} s
    join operation o on o.id = s.operation_id and o.superseded_by is null
    left join data_location l on l.id = o.target_location_id
    left join circuit_breaker b on o.status = 'PENDING' and b.kind = o.kind
      and b.location_id = o.target_location_id and b.state <> 'CLOSED'
    left join lateral (select * from (
      select f.max_live, (select count(*) from operation p
          where p.kind = any(case when f.kind is null then ${KINDS} else array[f.kind] end)
            and p.target_location_id = f.location_id
            and p.status in ('SCHEDULED', 'IN_PROGRESS'))::int as live
      from flow_limit f
      where o.status = 'PENDING' and f.location_id = o.target_location_id
        and (f.kind is null or f.kind = o.kind)) x
      order by x.live - x.max_live desc limit 1
    ) fl on true
    order by o.created_at, o.id`);
  return rows.map((r) => ({
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    subjectId: String(r.subject),
    targetLocationId: r.target_location_id == null ? null : String(r.target_location_id),
    target: r.site == null ? null : `${String(r.site)}/${String(r.name)}`,
    attempt: Number(r.attempt),
    workerId: r.worker_id == null ? null : String(r.worker_id),
    notBefore: toDate(r.not_before)?.getTime() ?? null,
    since: (toDate(r.status_changed_at) as Date).getTime(),
    lastError:
      r.error_message == null
        ? null
        : {
            message: String(r.error_message),
            ...(r.error_code == null ? {} : { code: String(r.error_code) }),
          },
    completedTransitionId: r.completed_transition == null ? null : Number(r.completed_transition),
    breaker: r.breaker == null ? null : (r.breaker as CircuitState),
    limit: r.max_live == null ? null : { max: Number(r.max_live), live: Number(r.live) },
  }));
}

function toCopy(r: Row): PackageCopyRow {
  return {
    id: String(r.id),
    artifactType: String(r.artifact_type),
    artifactId: String(r.artifact_id),
    locationId: String(r.location_id),
    location: `${String(r.site)}/${String(r.name)}`,
    status: String(r.status),
    path: r.path == null ? null : String(r.path),
  };
}

/**
 * One raw data package or data transfer package (whichever `id` names) with everything its state
 * and step are derived from (`derivePackageState`, `classifyPackageStep`): its family's
 * operations (its own, its transfer package's and, for a transfer package, its members'), with
 * each PENDING one's circuit breaker and fullest flow limit and each COMPLETED one's completion,
 * the family's copies, the pipelines' lowest cursor; and its lineage: its transfer package, the
 * members and their files. `undefined` when no package has that id. Every part is a range of an
 * index: the subtypes' artifact indexes, the transitions by operation, the live work by (kind,
 * target), the copies by artifact, the packages by transfer package.
 *
 * @example
 * ```ts
 * const found = await selectPackage(database, id);
 * if (found) classifyPackageStep(found.facts, clock.now());
 * ```
 */
export async function selectPackage(
  exec: Executor | Database,
  packageId: string,
): Promise<PackageRecord | undefined> {
  const id = checkId(packageId, 'package id');
  // One snapshot for every part: read apart, an archive that completed between the read of the
  // copies and the read of the operations would look COMPLETED without its copy.
  if (!('transaction' in exec)) return readPackage(exec, id);
  return exec.transaction(async (tx) => {
    await tx.execute(sql`set transaction isolation level repeatable read, read only`);
    return readPackage(tx, id);
  });
}

async function readPackage(exec: Executor, id: string): Promise<PackageRecord | undefined> {
  const [head] = await exec.execute(sql`
    select 'raw_data_package' as type, p.id, p.name, d.id as dtp, d.name as dtp_name
      from raw_data_package p left join data_transfer_package d on d.id = p.data_transfer_package_id
      where p.id = ${id}::uuid
    union all
    select 'data_transfer_package', d.id, d.name, d.id, d.name
      from data_transfer_package d where d.id = ${id}::uuid`);
  if (head === undefined) return undefined;
  const type = head.type as PackageType;
  const dtp = head.dtp == null ? null : String(head.dtp);
  const memberRows =
    dtp === null
      ? [{ id, name: head.name, packaged: false }]
      : await exec.execute(sql`
          select p.id, p.name, exists (select 1 from packaging_operation po
            join operation o on o.id = po.operation_id
            where po.raw_data_package_id = p.id and o.status = 'COMPLETED') as packaged
          from raw_data_package p where p.data_transfer_package_id = ${dtp}::uuid order by p.name, p.id`);
  const all = memberRows.map((r) => ({
    id: String(r.id),
    name: String(r.name),
    packaged: r.packaged === true,
  }));
  const members = type === 'raw_data_package' ? [id] : all.map((m) => m.id);
  const bundles = dtp === null ? [] : [dtp];
  const [operations, copies, files, [count], [cursor], rollbacks] = await Promise.all([
    operationsOf(exec, members, bundles),
    exec.execute(sql`
      select c.id, c.artifact_type, c.artifact_id, c.location_id, c.status, c.path, l.site, l.name
      from physical_copy c join data_location l on l.id = c.location_id
      where c.artifact_id = any(${uuidArray([...members, ...bundles])})
      order by c.artifact_type desc, c.created_at, c.id`),
    exec.execute(sql`select id, name, raw_data_package_id from raw_data_file
      where raw_data_package_id = any(${uuidArray(members)}) order by name, id limit ${FILES_SHOWN}`),
    exec.execute(sql`select count(*)::int as n from raw_data_file
      where raw_data_package_id = any(${uuidArray(members)})`),
    exec.execute(sql`select min(after_id) as after_id from pipeline_cursor`),
    exec.execute(sql`select id, artifact_id, stage, requested_by, created_at,
        jsonb_array_length(plan->'redone') as redone
      from pipeline_rollback where artifact_id = any(${uuidArray([id, ...bundles])})
      order by created_at, id`),
  ]);
  const copyRows = copies.map(toCopy);
  return {
    copies: copyRows,
    facts: {
      type,
      id,
      members,
      transferPackageId: dtp,
      operations,
      copies: copyRows,
      pipelineCursor: cursor?.after_id == null ? null : Number(cursor.after_id),
      bundle:
        dtp === null
          ? null
          : { members: all.length, packaged: all.filter((m) => m.packaged).length },
    },
    name: String(head.name),
    transferPackage: dtp === null ? null : { id: dtp, name: String(head.dtp_name) },
    members: dtp === null ? [] : all,
    files: files.map((r) => ({
      id: String(r.id),
      name: String(r.name),
      rawDataPackageId: String(r.raw_data_package_id),
    })),
    filesTotal: Number(count?.n ?? 0),
    rollbacks: rollbacks.map((r) => ({
      id: String(r.id),
      artifactId: String(r.artifact_id),
      stage: String(r.stage),
      requestedBy: String(r.requested_by),
      at: toDate(r.created_at) as Date,
      redone: Number(r.redone),
    })),
  };
}
