import { sql } from 'drizzle-orm';
import type { MemberOutcome } from '../machines/ArchiveState.ts';
import { manifestBytes, sha256 } from '../machines/packageLayout.ts';
import { type PhysicalCopyRecord, toCopyRecord } from './ArtifactRepository.ts';
import { checkId } from './applyEvents.ts';
import type { DeletionMemberRecord, DeletionPlanRecord, OutcomeInput } from './DeletionPlan.ts';
import type { DeletionPolicy } from './DeletionPolicyRepository.ts';
import { toDate } from './OperationRecord.ts';
import type { Database, Row } from './openDatabase.ts';
import { activeClaimsOn } from './sql/activeClaimsOn.ts';
import { byKey } from './sql/byKey.ts';
import { type DeletionStepFacts, deletionStep } from './sql/deletionStep.ts';
import { writeReceipt } from './sql/writeReceipt.ts';

// Declared with the plan insert they share their fields with; published from here.
export type { DeletionMemberRecord, DeletionPlanRecord } from './DeletionPlan.ts';

/** A finished deletion's durable receipt. */
export interface DeletionReceipt {
  readonly deletionId: string;
  readonly copyId: string;
  readonly membersDeleted: number;
  readonly membersMissing: number;
  readonly bytes: number;
  readonly archiveOperationId: string;
  readonly archiveKey: string | null;
  readonly archiveObjectVersion: string | null;
  readonly archiveObjectSha256: string;
  readonly archiveDigest: string;
  readonly detail: Record<string, unknown> | null;
  readonly by: string;
  readonly at: Date;
}

/** A copy the deleters may schedule: eligible under the policy, with the archive that allows it. */
export interface EligibleCopy {
  readonly copyId: string;
  readonly archiveOperationId: string;
  readonly locationType: string;
}

/** A deletion whose lease ran out, for a takeover. */
export interface LapsedDeletion {
  readonly deletionId: string;
  readonly copyId: string;
  readonly holder: string;
  readonly rootPath: string;
  readonly rootDevice: string;
  readonly rootInode: string;
}

export function toPlanRecord(r: Row): DeletionPlanRecord {
  return {
    id: String(r.id),
    copyId: String(r.physical_copy_id),
    plan: Number(r.plan),
    archiveOperationId: String(r.archive_operation_id),
    archiveCopyId: String(r.archive_copy_id),
    archiveDigest: String(r.archive_digest),
    archiveObjectSha256: String(r.archive_object_sha256),
    path: String(r.path),
    folder: r.folder === true,
    rootPath: String(r.root_path),
    rootDevice: String(r.root_device),
    rootInode: String(r.root_inode),
    holder: String(r.holder),
    epoch: Number(r.epoch),
    leaseUntil: toDate(r.lease_until) as Date,
    createdAt: toDate(r.created_at) as Date,
  };
}

function toReceipt(r: Row): DeletionReceipt {
  return {
    deletionId: String(r.deletion_id),
    copyId: String(r.physical_copy_id),
    membersDeleted: Number(r.members_deleted),
    membersMissing: Number(r.members_missing),
    bytes: Number(r.bytes),
    archiveOperationId: String(r.archive_operation_id),
    archiveKey: r.archive_key == null ? null : String(r.archive_key),
    archiveObjectVersion:
      r.archive_object_version == null ? null : String(r.archive_object_version),
    archiveObjectSha256: String(r.archive_object_sha256),
    archiveDigest: String(r.archive_digest),
    detail: r.detail == null ? null : (r.detail as Record<string, unknown>),
    by: String(r.by),
    at: toDate(r.at) as Date,
  };
}

/**
 * The deletion path's records: which copies are eligible, which deletions wait for a deleter or
 * lost theirs, each plan with its members and outcomes, the per-member step (`deletionStep`) and
 * the receipt. Status changes of the copy itself go through `CopyLifecycle`, never through here.
 *
 * @example
 * ```ts
 * const deletions = new DeletionRepository(database);
 * for (const c of await deletions.eligible(policy, 16)) await copies.apply(c.copyId, { type: 'SCHEDULE_DELETION' }, { by });
 * ```
 */
export class DeletionRepository {
  constructor(private readonly database: Database) {}

  /**
   * PRESENT copies at a location type the policy cleans, consumed by a long-term-archive operation
   * that COMPLETED more than the grace period ago with a VERIFIED archive and that no rollback
   * superseded, and held by no active
   * claim: candidates for SCHEDULE_DELETION (whose guard still decides). Read from the deleters'
   * work list (`deletion_candidate`: copies of verified archives not yet DELETED, by location
   * type), so a pass costs what is left to clean, not the archive history.
   *
   * @example
   * ```ts
   * const candidates = await deletions.eligible(await policies.get(), 16);
   * ```
   */
  async eligible(policy: DeletionPolicy, limit: number): Promise<EligibleCopy[]> {
    if (policy.cleanLocationTypes.length === 0) return [];
    const rows = await this.database.execute(sql`
      select c.id as copy_id, o.id as archive_operation_id, d.location_type
      from deletion_candidate d
      join ${byKey(
        'operation',
        'o',
        'd.archive_operation_id',
        'o.id, o.finished_at',
        sql`o.kind = 'long_term_archive' and o.status = 'COMPLETED' and o.superseded_by is null
          and o.finished_at <= now() - ${policy.graceSeconds}::int * interval '1 second'`,
      )} on true
      join ${byKey('physical_copy', 'c', 'd.physical_copy_id', 'c.id', sql`c.status = 'PRESENT' and c.path is not null`)} on true
      where d.location_type in (select jsonb_array_elements_text(${JSON.stringify(policy.cleanLocationTypes)}::jsonb))
        and (select r.state from archive_record r where r.operation_id = o.id
             and r.state in ('VERIFIED', 'VERIFY_FAILED') order by r.id desc limit 1) = 'VERIFIED'
        and not exists (${activeClaimsOn(sql`c.id`)})
      order by o.finished_at
      limit ${Math.max(1, Math.floor(limit))}::int`);
    return rows.map((r) => ({
      copyId: String(r.copy_id),
      archiveOperationId: String(r.archive_operation_id),
      locationType: String(r.location_type),
    }));
  }

  /**
   * Copies whose deletion is scheduled and waits for a deleter to plan and start it, each claimed
   * for `claimMs`: planning reads and hashes every member, so two deleters must not plan the same
   * copy at once (one of them would lose START_DELETION's compare-and-set after doing it all). A
   * claimed copy is left out of every other deleter's list until its claim runs out (the claimer
   * died before START_DELETION) or is released (`releaseClaim`). The claim is the copy's
   * `updated_at` set ahead to when it runs out; it changes neither status nor version, and
   * START_DELETION sets `updated_at` anew.
   *
   * @example
   * ```ts
   * for (const copy of await deletions.scheduled(16, 60_000)) await planAndStart(copy);
   * ```
   */
  async scheduled(
    limit: number,
    claimMs: number,
  ): Promise<(PhysicalCopyRecord & { storageRoot: string })[]> {
    const rows = await this.database.execute(sql`
      with picked as (
        select id from physical_copy
        where status = 'DELETION_SCHEDULED' and updated_at <= now()
        order by updated_at limit ${Math.max(1, Math.floor(limit))}::int
        for update skip locked)
      update physical_copy c
      set updated_at = now() + ${Math.max(0, Math.floor(claimMs))}::int * interval '1 millisecond'
      from picked, data_location l
      where c.id = picked.id and l.id = c.location_id and c.status = 'DELETION_SCHEDULED'
      returning c.*, l.storage_root`);
    return rows.map((r) => ({ ...toCopyRecord(r), storageRoot: String(r.storage_root) }));
  }

  /** Gives up a claim taken by `scheduled` (this deleter cannot plan the copy): others may now. */
  async releaseClaim(copyId: string): Promise<void> {
    await this.database.execute(sql`
      update physical_copy set updated_at = now()
      where id = ${copyId}::uuid and status = 'DELETION_SCHEDULED' and updated_at > now()`);
  }

  /**
   * Deletions in progress whose lease ran out (their deleter died or froze), for a takeover.
   *
   * @example
   * ```ts
   * for (const d of await deletions.lapsed(16)) await copies.apply(d.copyId, { type: 'RESUME_DELETION' }, …);
   * ```
   */
  async lapsed(limit: number): Promise<LapsedDeletion[]> {
    const rows = await this.database.execute(sql`
      select d.id, d.physical_copy_id, d.holder, d.root_path, d.root_device, d.root_inode
      from physical_copy c
      join lateral (select * from copy_deletion x where x.physical_copy_id = c.id
                    order by x.plan desc limit 1) d on true
      where c.status = 'DELETION_IN_PROGRESS' and d.lease_until < now()
      limit ${Math.max(1, Math.floor(limit))}::int`);
    return rows.map((r) => ({
      deletionId: String(r.id),
      copyId: String(r.physical_copy_id),
      holder: String(r.holder),
      rootPath: String(r.root_path),
      rootDevice: String(r.root_device),
      rootInode: String(r.root_inode),
    }));
  }

  /**
   * The member list an archive gives a copy of its package: the PLANNED manifest of the archive's
   * last VERIFIED generation, with the digest of the `MANIFEST.json` the archived package holds
   * (which a folder's own manifest must equal to be deleted).
   *
   * @example
   * ```ts
   * const archived = await deletions.archivedManifest(archiveOperationId);
   * ```
   */
  async archivedManifest(archiveOperationId: string): Promise<{
    members: { name: string; size: number; sha256: string }[];
    package: { name: string; size: number; sha256: string }[];
    manifestSha256: string | null;
    contentSha256: string;
    size: number;
  } | null> {
    const [r] = await this.database.execute(sql`
      with v as (select generation, archive_key from archive_record
        where operation_id = ${checkId(archiveOperationId)}::uuid and state = 'VERIFIED'
        order by id desc limit 1)
      select p.manifest, p.content_sha256, p.size from archive_record p, v
      where p.operation_id = ${archiveOperationId}::uuid and p.state = 'PLANNED'
        and p.generation = v.generation and p.archive_key = v.archive_key
      order by p.id desc limit 1`);
    if (r === undefined) return null;
    const m = r.manifest as {
      members?: { name: string; size: number; sha256: string }[];
      package?: { name: string; size: number; sha256: string }[];
      manifestSha256?: string;
      packageManifestSha256?: string;
    };
    // The manifest the archive holds. A plan recorded before this was written down archived a
    // folder with the manifest opstate regenerates from the members, whatever the folder's own
    // file said (`manifestSha256` is that file's digest, not the archive's).
    const held =
      m.packageManifestSha256 ??
      (m.manifestSha256 === undefined ? null : sha256(manifestBytes(m.package ?? [])));
    return {
      members: m.members ?? [],
      package: m.package ?? [],
      manifestSha256: held,
      contentSha256: String(r.content_sha256),
      size: Number(r.size),
    };
  }

  /**
   * Every source member a deletion relying on this archive removed: its path, its name in the
   * package, whether its copy was a folder, and the digest its plan recorded (the bytes checked
   * before the unlink). What `opstate archive verify` holds the archive to.
   *
   * @example
   * ```ts
   * const deleted = await deletions.deletedMembersOf(archiveOperationId);
   * ```
   */
  async deletedMembersOf(
    archiveOperationId: string,
  ): Promise<{ path: string; name: string; folder: boolean; sha256: string }[]> {
    const rows = await this.database.execute(sql`
      select m.path, m.name, d.folder, m.sha256
      from copy_deletion d
      join copy_deletion_member m on m.deletion_id = d.id
      join copy_deletion_outcome x on x.deletion_id = m.deletion_id and x.seq = m.seq
      where d.archive_operation_id = ${checkId(archiveOperationId)}::uuid
        and x.outcome = 'DELETED'
      order by d.id, m.seq`);
    return rows.map((r) => ({
      path: String(r.path),
      name: String(r.name),
      folder: r.folder === true,
      sha256: String(r.sha256),
    }));
  }

  /**
   * A deletion plan with its members and their outcomes.
   *
   * @example
   * ```ts
   * const { plan, members } = await deletions.load(deletionId);
   * const remaining = members.filter((m) => m.outcome === null);
   * ```
   */
  async load(
    deletionId: string,
  ): Promise<{ plan: DeletionPlanRecord; members: DeletionMemberRecord[] } | undefined> {
    const id = checkId(deletionId, 'deletion id');
    const [p] = await this.database.execute(
      sql`select * from copy_deletion where id = ${id}::uuid`,
    );
    if (p === undefined) return undefined;
    const rows = await this.database.execute(sql`
      select m.*, x.outcome, x.reason, x.epoch as outcome_epoch, x.at
      from copy_deletion_member m
      left join copy_deletion_outcome x on x.deletion_id = m.deletion_id and x.seq = m.seq
      where m.deletion_id = ${id}::uuid order by m.seq`);
    return {
      plan: toPlanRecord(p),
      members: rows.map((r) => ({
        seq: Number(r.seq),
        name: String(r.name),
        path: String(r.path),
        device: String(r.device),
        inode: String(r.inode),
        size: Number(r.size),
        mtimeNs: String(r.mtime_ns),
        sha256: String(r.sha256),
        outcome: (r.outcome ?? null) as MemberOutcome | null,
        reason: r.reason == null ? null : String(r.reason),
        epoch: r.outcome_epoch == null ? null : Number(r.outcome_epoch),
        at: toDate(r.at),
      })),
    };
  }

  /**
   * Every deletion plan of a copy, oldest first.
   *
   * @example
   * ```ts
   * const plans = await deletions.plansOf(copyId);
   * ```
   */
  async plansOf(copyId: string): Promise<DeletionPlanRecord[]> {
    const rows = await this.database.execute(sql`
      select * from copy_deletion where physical_copy_id = ${checkId(copyId, 'copy id')}::uuid
      order by plan`);
    return rows.map(toPlanRecord);
  }

  /**
   * One step of a running deletion (see `deletionStep`): record the previous outcome, renew the
   * lease, read the facts for the next unlink.
   *
   * @example
   * ```ts
   * const facts = await deletions.step({ deletionId, epoch, holder, leaseMs, previous });
   * if (!facts.leaseHeld) return; // another deleter took over
   * ```
   */
  step(input: {
    deletionId: string;
    epoch: number;
    holder: string;
    leaseMs: number;
    previous?: OutcomeInput;
    finish?: boolean;
  }): Promise<DeletionStepFacts> {
    return deletionStep(this.database, input);
  }

  /**
   * Renews a lease this deleter holds; false when it was lost.
   *
   * @example
   * ```ts
   * if (!(await deletions.renew(deletionId, epoch, holder, leaseMs))) stop();
   * ```
   */
  async renew(
    deletionId: string,
    epoch: number,
    holder: string,
    leaseMs: number,
  ): Promise<boolean> {
    const rows = await this.database.execute(sql`
      update copy_deletion set lease_until = now() + ${leaseMs}::int * interval '1 millisecond'
      where id = ${deletionId}::uuid and epoch = ${epoch}::int and holder = ${holder}
      returning id`);
    return rows.length === 1;
  }

  /**
   * Writes the durable receipt of a finished plan, under the caller's lease, with the RECEIPTED
   * archive record row, in one statement: only when every member has an outcome and none was
   * kept. The receipt counts the members removed and found missing over every plan of the copy.
   * Idempotent: an existing receipt comes back unchanged.
   *
   * @example
   * ```ts
   * const receipt = await deletions.receipt({ deletionId, epoch, holder, detail: { folderRemoved: true } });
   * ```
   */
  async receipt(input: {
    deletionId: string;
    epoch: number;
    holder: string;
    detail: Record<string, unknown>;
  }): Promise<DeletionReceipt | undefined> {
    const found = await writeReceipt(this.database, input);
    return found === null ? undefined : toReceipt(found);
  }

  /**
   * The receipt of a copy's deletion, if it has one.
   *
   * @example
   * ```ts
   * const receipt = await deletions.receiptOf(copyId);
   * ```
   */
  async receiptOf(copyId: string): Promise<DeletionReceipt | undefined> {
    const [r] = await this.database.execute(sql`
      select * from copy_deletion_receipt where physical_copy_id = ${checkId(copyId, 'copy id')}::uuid
      order by at desc limit 1`);
    return r === undefined ? undefined : toReceipt(r);
  }
}
