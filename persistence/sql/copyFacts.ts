import { type SQL, sql } from 'drizzle-orm';
import type { CopyFacts, CopyState } from '../../machines/decideCopy.ts';
import type { PhysicalCopyStatus } from '../../machines/physicalCopyMachine.ts';
import type { Row } from '../openDatabase.ts';
import { activeClaimsOn } from './activeClaimsOn.ts';
import { byKey } from './byKey.ts';

/** The current deletion plan of a copy, as the facts see it. */
export interface CurrentDeletion {
  readonly id: string;
  readonly plan: number;
  readonly holder: string;
  readonly epoch: number;
  readonly leaseUntil: Date;
}

/** A copy's stored state, its version and the facts read with them, from one snapshot. */
export interface CopyFactsRow {
  readonly copyId: string;
  readonly version: number;
  readonly state: CopyState;
  readonly facts: CopyFacts;
  /** The whole-object digest of the verified archive's last verification, when there is one. */
  readonly archiveObjectSha256: string | null;
  readonly deletion: CurrentDeletion | null;
}

/**
 * The common table expressions that read every fact a copy status change decides on, for one copy,
 * ending in `f` (one row, or none when the copy does not exist). The same text serves the read
 * before a decision and the write that lands it, so both see the facts the same way:
 * - `c`: the copy, its location type, and `max_failures` from the deletion policy;
 * - `arch`: live copies of the same artifact at long-term-archive locations produced by a COMPLETED
 *   archive operation that no rollback superseded (a superseded archive vouches for nothing until
 *   its re-run verifies the copy again), with that operation's last verification, locked
 *   `FOR SHARE` so that a concurrent change of the archive copy waits for (or defeats) this
 *   statement;
 * - `f`: the facts: the verified archive (same digest as this copy), why none counts, the active
 *   retention claims, members already removed, the current deletion's lease and receipt.
 */
export function copyFactsCtes(copyId: SQL): SQL {
  return sql`
    c as (
      select pc.*, l.location_type,
        coalesce((select max_failures from deletion_policy where name = 'default'), 3) as max_failures
      from physical_copy pc join data_location l on l.id = pc.location_id
      where pc.id = ${copyId}
    ),
    arch as (
      select a.id as archive_copy_id, a.checksum as archive_checksum, o.id as operation_id,
        v.state as verification, v.object_sha256, v.content_sha256, a.created_at as archived_at
      from c
      join physical_copy a on a.artifact_type = c.artifact_type and a.artifact_id = c.artifact_id
        and a.id <> c.id and a.status = 'PRESENT'
      join data_location al on al.id = a.location_id and al.location_type = 'long_term_archive'
      join operation_output x on x.physical_copy_id = a.id
      join ${byKey('operation', 'o', 'x.operation_id', 'o.id', sql`o.kind = 'long_term_archive' and o.status = 'COMPLETED' and o.superseded_by is null`)} on true
      left join lateral (
        select r.state, r.object_sha256, r.content_sha256 from archive_record r
        where r.operation_id = o.id and r.state in ('VERIFIED', 'VERIFY_FAILED')
        order by r.id desc limit 1
      ) v on true
      for share of a
    ),
    good as (
      select * from arch, c
      where arch.verification = 'VERIFIED' and c.checksum is not null
        and arch.archive_checksum = c.checksum
        and 'sha256:' || arch.content_sha256 = c.checksum
      order by arch.archived_at, arch.archive_copy_id limit 1
    ),
    cur as (
      select d.id, d.plan, d.holder, d.epoch, d.lease_until,
        d.lease_until < now() as lease_expired,
        exists (select 1 from copy_deletion_receipt r where r.deletion_id = d.id) as receipted
      from copy_deletion d, c where d.physical_copy_id = c.id order by d.plan desc limit 1
    ),
    f as (
      select c.id as copy_id, c.status, c.version, c.deletion_failure_count, c.max_failures,
        c.last_error, c.checksum,
        (select archive_copy_id from good) as archive_copy_id,
        (select operation_id from good) as archive_operation_id,
        (select archive_checksum from good) as archive_digest,
        (select object_sha256 from good) as archive_object_sha256,
        case
          when exists (select 1 from good) then null
          when c.checksum is null then 'the copy has no checksum to compare an archive with'
          when not exists (select 1 from arch) then
            'no live copy of it at a long-term-archive location was produced by a completed archive operation'
          when not exists (select 1 from arch where verification = 'VERIFIED') then
            'its archive was never VERIFIED, or its last verification failed'
          else 'the archive copy''s digest differs from this copy''s ' || c.checksum
        end as archive_problem,
        array(
          select distinct h.id::text from (${activeClaimsOn(sql`c.id`)}) h order by 1
        ) as retained_by,
        (select count(*) from copy_deletion d join copy_deletion_outcome x on x.deletion_id = d.id
          where d.physical_copy_id = c.id and x.outcome = 'DELETED')::int as removed_members,
        (select row_to_json(cur) from cur) as deletion
      from c
    )`;
}

function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

function textArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string' && value.startsWith('{')) {
    return value
      .slice(1, -1)
      .split(',')
      .filter((v) => v !== '');
  }
  return [];
}

/** Maps the `f` row (selected as `f.*`) to typed facts. */
export function toCopyFactsRow(r: Row): CopyFactsRow {
  const d = json(r.deletion) as Row | null;
  const deletion: CurrentDeletion | null =
    d === null || d === undefined
      ? null
      : {
          id: String(d.id),
          plan: Number(d.plan),
          holder: String(d.holder),
          epoch: Number(d.epoch),
          leaseUntil: new Date(String(d.lease_until)),
        };
  const retainedBy = textArray(r.retained_by);
  const archive =
    r.archive_copy_id == null
      ? null
      : {
          copyId: String(r.archive_copy_id),
          operationId: String(r.archive_operation_id),
          digest: String(r.archive_digest),
        };
  return {
    copyId: String(r.copy_id),
    version: Number(r.version),
    state: {
      status: r.status as PhysicalCopyStatus,
      deletionFailureCount: Number(r.deletion_failure_count),
      maxDeletionFailures: Number(r.max_failures),
      lastError: r.last_error == null ? null : String(r.last_error),
    },
    facts: {
      verifiedArchive: archive !== null,
      archive,
      archiveProblem: r.archive_problem == null ? null : String(r.archive_problem),
      retained: retainedBy.length > 0,
      retainedBy,
      removedMembers: Number(r.removed_members),
      receipted: d?.receipted === true,
      leaseExpired: d?.lease_expired === true,
    },
    archiveObjectSha256: r.archive_object_sha256 == null ? null : String(r.archive_object_sha256),
    deletion,
  };
}
