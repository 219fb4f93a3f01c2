import { sql } from 'drizzle-orm';
import type { AttentionArchiveRow, AttentionCopyRow } from '../../machines/attention.ts';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { operationErrorOf } from '../UnreadableValue.ts';
import { type AttentionPage, capped } from './selectAttention.ts';

/** A (since, id) page condition on an aliased table. */
function pageOf(page: AttentionPage, since: string, id: string) {
  return page.after === undefined
    ? sql`true`
    : sql`(${sql.raw(since)}, ${sql.raw(id)}) > (${page.after.since.toISOString()}::timestamptz, ${page.after.id}::uuid)`;
}

/** The latest deletion plan of copy `c`, with its kept members. */
const LATEST_PLAN = sql.raw(`left join lateral (
    select d.id, d.archive_operation_id, d.holder, d.lease_until from copy_deletion d
    where d.physical_copy_id = c.id order by d.plan desc limit 1) d on true
  left join lateral (
    select coalesce(json_agg(json_build_object('name', m.name, 'reason', x.reason) order by x.seq), '[]') as kept
    from copy_deletion_outcome x
    join copy_deletion_member m on m.deletion_id = x.deletion_id and m.seq = x.seq
    where x.deletion_id = d.id and x.outcome = 'KEPT') k on true
  left join data_location l on l.id = c.location_id`);

function toCopyRow(r: Row): AttentionCopyRow {
  return {
    id: String(r.id),
    artifactType: String(r.artifact_type),
    artifactId: String(r.artifact_id),
    location: r.site == null ? '?' : `${String(r.site)}/${String(r.name)}`,
    status: String(r.status),
    deletionFailureCount: Number(r.deletion_failure_count),
    lastError: r.last_error == null ? null : String(r.last_error),
    since: toDate(r.since) as Date,
    archiveOperationId: r.archive_operation_id == null ? null : String(r.archive_operation_id),
    kept: r.kept == null ? [] : (r.kept as { name: string; reason: string | null }[]),
    holder: r.holder == null ? null : String(r.holder),
  };
}

const COPY_COLUMNS = sql.raw(`c.id, c.artifact_type, c.artifact_id, c.status,
  c.deletion_failure_count, c.last_error, l.site, l.name, d.archive_operation_id, d.holder, k.kept`);

/**
 * Copies whose deletion failed or is blocked (DELETION_FAILED), oldest first (partial index),
 * with the archive operation of their latest plan and the members it kept, with the reasons.
 */
export async function selectDeletionFailed(
  exec: Executor,
  page: AttentionPage,
): Promise<AttentionCopyRow[]> {
  const rows = await exec.execute(sql`
    select ${COPY_COLUMNS}, c.updated_at as since
    from physical_copy c ${LATEST_PLAN}
    where c.status = 'DELETION_FAILED' and ${pageOf(page, 'c.updated_at', 'c.id')}
    order by c.updated_at, c.id limit ${page.limit}`);
  return rows.map(toCopyRow);
}

/**
 * Deletions in progress whose deleter's lease ran out before `cutoff` (nobody took them over),
 * oldest lapse first; the partial index of deleting copies bounds the scan.
 */
export async function selectDeletionStalled(
  exec: Executor,
  cutoff: Date,
  page: AttentionPage,
): Promise<AttentionCopyRow[]> {
  const rows = await exec.execute(sql`
    select * from (
      select ${COPY_COLUMNS}, d.lease_until as since
      from physical_copy c ${LATEST_PLAN}
      where c.status = 'DELETION_IN_PROGRESS' and d.lease_until < ${cutoff.toISOString()}::timestamptz
    ) c where ${pageOf(page, 'c.since', 'c.id')}
    order by c.since, c.id limit ${page.limit}`);
  return rows.map(toCopyRow);
}

/** How many deletions `selectDeletionStalled` lists (capped). */
export async function countDeletionStalled(exec: Executor, cutoff: Date): Promise<number> {
  const [row] = await exec.execute(
    sql`select ${capped(sql`
    from physical_copy c
    join lateral (select d.lease_until from copy_deletion d where d.physical_copy_id = c.id
      order by d.plan desc limit 1) d on true
    where c.status = 'DELETION_IN_PROGRESS' and d.lease_until < ${cutoff.toISOString()}::timestamptz`)} as n`,
  );
  return Number(row?.n ?? 0);
}

/** The FAILED archive operations whose last durable archive state is a conflict or a failed verify. */
const ARCHIVE_CONFLICTS = sql.raw(`from operation o
  join lateral (select r.state, r.archive_key from archive_record r
    where r.operation_id = o.id order by r.id desc limit 1) r on true
  where o.status = 'FAILED' and coalesce(o.last_error->>'code', '') <> 'CANCELLED'
    and o.kind = 'long_term_archive' and r.state in ('CONFLICT', 'VERIFY_FAILED')`);

/**
 * Archives stopped short of VERIFIED (another object at the key, or one that does not read
 * back), newest first like the failures they are: from the FAILED partial index, then each one's
 * last archive record row.
 */
export async function selectArchiveConflicts(
  exec: Executor,
  page: AttentionPage,
): Promise<AttentionArchiveRow[]> {
  const after =
    page.after === undefined
      ? sql`true`
      : sql`(o.finished_at, o.id) < (${page.after.since.toISOString()}::timestamptz, ${page.after.id}::uuid)`;
  const rows = await exec.execute(sql`
    select o.id, o.kind, o.status, o.finished_at as since, o.last_error, r.state, r.archive_key
    ${ARCHIVE_CONFLICTS} and ${after}
    order by o.finished_at desc, o.id desc limit ${page.limit}`);
  return rows.map((r) => ({
    operationId: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    archiveState: String(r.state),
    archiveKey: r.archive_key == null ? null : String(r.archive_key),
    since: toDate(r.since) as Date,
    lastError: r.last_error == null ? null : operationErrorOf(r.last_error),
  }));
}

/** How many archives `selectArchiveConflicts` lists (capped). */
export async function countArchiveConflicts(exec: Executor): Promise<number> {
  const [row] = await exec.execute(sql`select ${capped(ARCHIVE_CONFLICTS)} as n`);
  return Number(row?.n ?? 0);
}
