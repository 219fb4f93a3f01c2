import { sql } from 'drizzle-orm';
import type { Executor, Row } from '../openDatabase.ts';

function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

/**
 * Writes the receipt of a finished deletion plan in ONE statement, under the caller's lease epoch,
 * with its RECEIPTED archive record row: only when every member of the plan has an outcome and none
 * was kept. It lists every member removed (or found missing) over every plan of the copy, their
 * bytes, and the archive relied on (key, object version, digests). Returns the receipt row written
 * now or written before (idempotent), or null when it may not be written yet.
 */
export async function writeReceipt(
  exec: Executor,
  input: { deletionId: string; epoch: number; holder: string; detail: Record<string, unknown> },
): Promise<Row | null> {
  const [row] = await exec.execute(sql`
      with d as (select * from copy_deletion where id = ${input.deletionId}::uuid
                 and epoch = ${input.epoch}::int and holder = ${input.holder}),
      done as (
        select m.path, m.name, m.size, m.sha256, x.outcome, p.plan from copy_deletion p
        join copy_deletion_member m on m.deletion_id = p.id
        join copy_deletion_outcome x on x.deletion_id = m.deletion_id and x.seq = m.seq
        join d on p.physical_copy_id = d.physical_copy_id
        where x.outcome in ('DELETED', 'MISSING')
      ),
      v as (
        select r.* from archive_record r, d where r.operation_id = d.archive_operation_id
          and r.state = 'VERIFIED' order by r.id desc limit 1
      ),
      ready as (
        select d.* from d
        where not exists (select 1 from copy_deletion_outcome x where x.deletion_id = d.id and x.outcome = 'KEPT')
          and (select count(*) from copy_deletion_member m where m.deletion_id = d.id)
            = (select count(*) from copy_deletion_outcome x where x.deletion_id = d.id)
      ),
      ins as (
        insert into copy_deletion_receipt (deletion_id, physical_copy_id, members_deleted,
          members_missing, bytes, archive_operation_id, archive_key, archive_object_version,
          archive_object_sha256, archive_digest, detail, by)
        select ready.id, ready.physical_copy_id,
          (select count(*) from done where outcome = 'DELETED')::int,
          (select count(*) from done where outcome = 'MISSING')::int,
          coalesce((select sum(size) from done where outcome = 'DELETED'), 0)::bigint,
          ready.archive_operation_id, (select archive_key from v), (select object_version from v),
          ready.archive_object_sha256, ready.archive_digest,
          ${JSON.stringify(input.detail)}::jsonb || jsonb_build_object('members',
            coalesce((select jsonb_agg(jsonb_build_object('path', path, 'outcome', outcome,
              'size', size, 'sha256', sha256, 'plan', plan) order by plan, path) from done), '[]'::jsonb)),
          ${input.holder}
        from ready
        on conflict do nothing
        returning *
      ),
      rec as (
        insert into archive_record (operation_id, generation, state, by, archive_key, object_version,
          object_sha256, content_sha256, deletion_id, detail)
        select ins.archive_operation_id,
          coalesce((select max(generation) from operation_replan r where r.operation_id = ins.archive_operation_id), 1),
          'RECEIPTED', ${input.holder}, (select archive_key from v), (select object_version from v),
          (select object_sha256 from v), (select content_sha256 from v), ins.deletion_id,
          jsonb_build_object('copyId', ins.physical_copy_id, 'membersDeleted', ins.members_deleted,
            'membersMissing', ins.members_missing, 'bytes', ins.bytes)
        from ins
      )
      select (select row_to_json(ins) from ins) as inserted,
        (select row_to_json(r) from copy_deletion_receipt r where r.deletion_id = ${input.deletionId}::uuid) as existing`);
  return (json(row?.inserted) ?? json(row?.existing) ?? null) as Row | null;
}
