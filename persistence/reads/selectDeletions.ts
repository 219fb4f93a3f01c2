import { sql } from 'drizzle-orm';
import type { PhysicalCopyStatus } from '../../machines/physicalCopyMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';

/** One deletion plan of a copy, with what became of it and the archive it relied on. */
export interface DeletionListRow {
  readonly deletionId: string;
  readonly plan: number;
  readonly copyId: string;
  readonly copyStatus: PhysicalCopyStatus;
  readonly artifactType: string;
  readonly artifactName: string | null;
  /** `site/name` of the copy's location. */
  readonly location: string;
  readonly path: string;
  readonly holder: string;
  readonly leaseUntil: Date;
  /** The lease ran out (by the database's clock). */
  readonly leaseExpired: boolean;
  /** When the plan was written (the deletion started). */
  readonly startedAt: Date;
  readonly members: number;
  readonly deleted: number;
  readonly kept: number;
  readonly missing: number;
  /** The long-term archive the plan relies on, as the plan names it. */
  readonly archive: {
    readonly operationId: string;
    readonly copyId: string;
    /** Where the archive copy is (`site/name`). */
    readonly location: string | null;
    readonly objectSha256: string;
    /** The archive's latest verification (`VERIFIED` or `VERIFY_FAILED`), when and at which key. */
    readonly verification: string | null;
    readonly verifiedAt: Date | null;
    readonly key: string | null;
    readonly objectVersion: string | null;
  };
  /** The durable receipt of a finished deletion: null until it is written. */
  readonly receipt: {
    readonly membersDeleted: number;
    readonly membersMissing: number;
    readonly bytes: number;
    readonly by: string;
    readonly at: Date;
    readonly archiveKey: string | null;
    readonly archiveObjectVersion: string | null;
  } | null;
}

/**
 * One page of deletion plans, newest first (their ids are time-ordered), after the previous
 * page's last id: each with its copy, its members' outcomes so far, its receipt, and the
 * verification of the archive it relied on. The primary key is walked backwards, and every
 * other read is by key.
 *
 * @example
 * ```ts
 * const deletions = await selectDeletions(database, { limit: 50 });
 * ```
 */
export async function selectDeletions(
  exec: Executor,
  page: { readonly limit: number; readonly after?: string | undefined },
): Promise<DeletionListRow[]> {
  const after = page.after === undefined ? sql`true` : sql`d.id < ${page.after}::uuid`;
  const rows = await exec.execute(sql`
    select d.id, d.plan, d.physical_copy_id, d.path, d.holder, d.lease_until, d.created_at,
      d.lease_until < now() as lease_expired,
      d.archive_operation_id, d.archive_copy_id, d.archive_object_sha256,
      c.status as copy_status, c.artifact_type, l.site, l.name as location_name,
      coalesce(rf.name, rp.name, dt.name) as artifact_name,
      al.site as archive_site, al.name as archive_location_name,
      (select count(*) from copy_deletion_member m where m.deletion_id = d.id)::int as members,
      x.deleted, x.kept, x.missing,
      v.state as verification, v.at as verified_at, v.archive_key, v.object_version,
      r.members_deleted, r.members_missing, r.bytes, r.by as receipt_by, r.at as receipt_at,
      r.archive_key as receipt_key, r.archive_object_version as receipt_version
    from copy_deletion d
    join physical_copy c on c.id = d.physical_copy_id
    join data_location l on l.id = c.location_id
    left join raw_data_file rf on c.artifact_type = 'raw_data_file' and rf.id = c.artifact_id
    left join raw_data_package rp on c.artifact_type = 'raw_data_package' and rp.id = c.artifact_id
    left join data_transfer_package dt on c.artifact_type = 'data_transfer_package' and dt.id = c.artifact_id
    left join physical_copy ac on ac.id = d.archive_copy_id
    left join data_location al on al.id = ac.location_id
    left join lateral (select
        count(*) filter (where o.outcome = 'DELETED')::int as deleted,
        count(*) filter (where o.outcome = 'KEPT')::int as kept,
        count(*) filter (where o.outcome = 'MISSING')::int as missing
      from copy_deletion_outcome o where o.deletion_id = d.id) x on true
    left join lateral (select a.state, a.at, a.archive_key, a.object_version from archive_record a
      where a.operation_id = d.archive_operation_id and a.state in ('VERIFIED', 'VERIFY_FAILED')
      order by a.id desc limit 1) v on true
    left join copy_deletion_receipt r on r.deletion_id = d.id
    where ${after}
    order by d.id desc
    limit ${page.limit}`);
  return rows.map((r) => ({
    deletionId: String(r.id),
    plan: Number(r.plan),
    copyId: String(r.physical_copy_id),
    copyStatus: r.copy_status as PhysicalCopyStatus,
    artifactType: String(r.artifact_type),
    artifactName: r.artifact_name == null ? null : String(r.artifact_name),
    location: `${String(r.site)}/${String(r.location_name)}`,
    path: String(r.path),
    holder: String(r.holder),
    leaseUntil: toDate(r.lease_until) as Date,
    leaseExpired: r.lease_expired === true,
    startedAt: toDate(r.created_at) as Date,
    members: Number(r.members),
    deleted: Number(r.deleted ?? 0),
    kept: Number(r.kept ?? 0),
    missing: Number(r.missing ?? 0),
    archive: {
      operationId: String(r.archive_operation_id),
      copyId: String(r.archive_copy_id),
      location:
        r.archive_site == null
          ? null
          : `${String(r.archive_site)}/${String(r.archive_location_name)}`,
      objectSha256: String(r.archive_object_sha256),
      verification: r.verification == null ? null : String(r.verification),
      verifiedAt: toDate(r.verified_at),
      key: r.archive_key == null ? null : String(r.archive_key),
      objectVersion: r.object_version == null ? null : String(r.object_version),
    },
    receipt:
      r.receipt_at == null
        ? null
        : {
            membersDeleted: Number(r.members_deleted),
            membersMissing: Number(r.members_missing),
            bytes: Number(r.bytes),
            by: String(r.receipt_by),
            at: toDate(r.receipt_at) as Date,
            archiveKey: r.receipt_key == null ? null : String(r.receipt_key),
            archiveObjectVersion: r.receipt_version == null ? null : String(r.receipt_version),
          },
  }));
}
