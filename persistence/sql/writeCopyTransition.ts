import { type SQL, sql } from 'drizzle-orm';
import type { PhysicalCopyStatus } from '../../machines/physicalCopyMachine.ts';
import type { DeletionPlanInsert } from '../DeletionPlan.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { type CopyFactsRow, copyFactsCtes, toCopyFactsRow } from './copyFacts.ts';

/** What a copy status write needs: the decision, the facts it was made on, and what rides along. */
export interface CopyWrite {
  readonly copyId: string;
  readonly expectedVersion: number;
  readonly from: PhysicalCopyStatus;
  readonly to: PhysicalCopyStatus;
  readonly event: string;
  readonly failureCount: number;
  readonly lastError: string | null;
  readonly by: string;
  readonly reason: string | null;
  /** The facts the decision was made on: the write lands only if they still hold. */
  readonly expect: {
    readonly archiveCopyId: string | null;
    readonly retained: boolean;
    readonly removedMembers: number;
    readonly receipted: boolean;
    readonly leaseExpired: boolean;
    readonly deletionId: string | null;
  };
  /** Only the holder of this lease epoch may write it (a deleter's own steps). */
  readonly fence?: { readonly deletionId: string; readonly epoch: number; readonly holder: string };
  /** START_DELETION: the plan, written in the same statement. */
  readonly plan?: DeletionPlanInsert;
  /** RESUME_DELETION: the lease this deleter takes over. */
  readonly takeover?: { readonly holder: string; readonly leaseMs: number };
  /** An archive record row written with the change (e.g. DELETION_FAILED). */
  readonly record?: { readonly state: string; readonly detail: Record<string, unknown> };
}

export interface CopyWriteResult {
  /** Null when the write did not land (the version moved or a fact changed). */
  readonly written: { readonly version: number; readonly epoch: number | null } | null;
  /** The facts as this statement read them. */
  readonly now: CopyFactsRow | null;
}

function planCtes(plan: DeletionPlanInsert): SQL {
  return sql`,
    dl as (
      insert into copy_deletion (id, physical_copy_id, plan, archive_operation_id, archive_copy_id,
        archive_digest, archive_object_sha256, path, folder, root_path, root_device, root_inode,
        holder, epoch, lease_until)
      select ${plan.deletionId}::uuid, u.id,
        coalesce((select max(plan) from copy_deletion where physical_copy_id = u.id), 0) + 1,
        ${plan.archiveOperationId}::uuid, ${plan.archiveCopyId}::uuid, ${plan.archiveDigest},
        ${plan.archiveObjectSha256}, ${plan.path}, ${plan.folder}, ${plan.rootPath},
        ${plan.rootDevice}, ${plan.rootInode}, ${plan.holder}, 1,
        now() + ${plan.leaseMs}::int * interval '1 millisecond'
      from u
      returning id, epoch
    ),
    dm as (
      insert into copy_deletion_member (deletion_id, seq, name, path, device, inode, size, mtime_ns, sha256)
      select dl.id, m.seq, m.name, m.path, m.device, m.inode, m.size, m."mtimeNs", m.sha256
      from dl, jsonb_to_recordset(${JSON.stringify(plan.members)}::jsonb) as m(
        seq int, name text, path text, device text, inode text, size bigint, "mtimeNs" text, sha256 text)
    ),
    dx as (
      insert into copy_deletion_outcome (deletion_id, seq, outcome, reason, epoch, by)
      select dl.id, x.seq, x.outcome, x.reason, 1, ${plan.holder}
      from dl, jsonb_to_recordset(${JSON.stringify(plan.outcomes)}::jsonb) as x(
        seq int, outcome text, reason text)
    ),
    dr as (
      insert into archive_record (operation_id, generation, state, by, archive_key, object_version,
        object_sha256, content_sha256, size, encrypted, key_id, deletion_id, detail)
      select v.operation_id, v.generation, 'SOURCE_REVALIDATED', ${plan.holder}, v.archive_key,
        v.object_version, v.object_sha256, v.content_sha256, v.size, v.encrypted, v.key_id, dl.id,
        ${JSON.stringify({ copyId: '', ...plan.detail })}::jsonb || jsonb_build_object('copyId', u.id)
      from dl, u, lateral (
        select * from archive_record r where r.operation_id = ${plan.archiveOperationId}::uuid
          and r.state = 'VERIFIED' order by r.id desc limit 1
      ) v
    )`;
}

function takeoverCtes(t: NonNullable<CopyWrite['takeover']>, deletionId: string | null): SQL {
  return sql`,
    dl as (
      update copy_deletion d set holder = ${t.holder}, epoch = d.epoch + 1,
        lease_until = now() + ${t.leaseMs}::int * interval '1 millisecond'
      from u where d.id = ${deletionId}::uuid and d.lease_until < now()
      returning d.id, d.epoch
    )`;
}

function recordCte(w: CopyWrite): SQL {
  const r = w.record;
  if (r === undefined || w.expect.deletionId === null) return sql``;
  return sql`,
    rec as (
      insert into archive_record (operation_id, generation, state, by, archive_key, object_version,
        object_sha256, content_sha256, deletion_id, detail)
      select d.archive_operation_id,
        coalesce((select max(generation) from operation_replan p
          where p.operation_id = d.archive_operation_id), 1),
        ${r.state}, ${w.by}, v.archive_key, v.object_version, v.object_sha256, v.content_sha256,
        d.id, ${JSON.stringify(r.detail)}::jsonb
      from u, copy_deletion d
      left join lateral (
        select * from archive_record x where x.operation_id = d.archive_operation_id
          and x.state = 'VERIFIED' order by x.id desc limit 1
      ) v on true
      where d.id = ${w.expect.deletionId}::uuid
    )`;
}

/**
 * Writes one copy status change in ONE statement: re-reads the copy's facts (`copyFactsCtes`, the
 * archive copy locked `FOR SHARE`), and only if they are still the facts the decision was made on
 * — and the copy is still at `expectedVersion` and `from`, and a fenced write still holds its
 * lease — moves the status with a compare-and-set on `version`, appends the history row, and
 * writes what rides along (the plan of a START_DELETION, the lease of a RESUME_DELETION, an
 * archive record row). Returns what was written (or null) and the facts it read, so a caller that
 * missed can decide again on them.
 */
export async function writeCopyTransition(exec: Executor, w: CopyWrite): Promise<CopyWriteResult> {
  const fence =
    w.fence === undefined
      ? sql`true`
      : sql`exists (select 1 from copy_deletion d where d.id = ${w.fence.deletionId}::uuid
          and d.epoch = ${w.fence.epoch}::int and d.holder = ${w.fence.holder}
          and d.id = (select id from cur))`;
  const extra =
    w.plan !== undefined
      ? planCtes(w.plan)
      : w.takeover !== undefined
        ? takeoverCtes(w.takeover, w.expect.deletionId)
        : sql``;
  const epoch =
    w.plan !== undefined || w.takeover !== undefined ? sql`(select epoch from dl)` : sql`null::int`;
  const [row] = await exec.execute(sql`
    with ${copyFactsCtes(sql`${w.copyId}::uuid`)},
    ok as (
      select 1 from f
      where f.archive_copy_id is not distinct from ${w.expect.archiveCopyId}::uuid
        and (cardinality(f.retained_by) > 0) = ${w.expect.retained}
        and f.removed_members = ${w.expect.removedMembers}::int
        and coalesce((select receipted from cur), false) = ${w.expect.receipted}
        and coalesce((select lease_expired from cur), false) = ${w.expect.leaseExpired}
        and (select id from cur) is not distinct from ${w.expect.deletionId}::uuid
        and ${fence}
    ),
    u as (
      update physical_copy p set status = ${w.to}, version = p.version + 1,
        deletion_failure_count = ${w.failureCount}::int, last_error = ${w.lastError},
        updated_at = now()
      where p.id = ${w.copyId}::uuid and p.version = ${w.expectedVersion}::int
        and p.status = ${w.from} and exists (select 1 from ok)
      returning p.id, p.version
    ),
    h as (
      insert into physical_copy_transition (physical_copy_id, from_status, to_status, event, version, by, reason)
      select u.id, ${w.from}, ${w.to}, ${w.event}, u.version, ${w.by}, ${w.reason} from u
    )${extra}${recordCte(w)}
    select (select row_to_json(f) from f) as facts,
      (select u.version from u) as written_version,
      ${epoch} as epoch`);
  const facts = row?.facts;
  const parsed = facts == null ? null : toCopyFactsRow(jsonRow(facts));
  const version = row?.written_version;
  return {
    written:
      version == null
        ? null
        : { version: Number(version), epoch: row?.epoch == null ? null : Number(row.epoch) },
    now: parsed,
  };
}

function jsonRow(value: unknown): Row {
  return (typeof value === 'string' ? JSON.parse(value) : value) as Row;
}
