import { sql } from 'drizzle-orm';
import type { OutcomeInput } from '../DeletionPlan.ts';
import type { Executor } from '../openDatabase.ts';
import { activeClaimsOn } from './activeClaimsOn.ts';

/** Everything a deleter must know, read fresh, immediately before it unlinks a member. */
export interface DeletionStepFacts {
  /** This deleter still holds the lease (and has just renewed it). */
  readonly leaseHeld: boolean;
  /** The archive the plan relies on is still a live, VERIFIED copy with the planned digests. */
  readonly archiveOk: boolean;
  /** Why not, when `archiveOk` is false. */
  readonly archiveProblem: string | null;
  /** The policy's protected prefixes as they are now. */
  readonly protectedPrefixes: readonly string[];
  /** The policy still cleans the copy's location type. */
  readonly cleaned: boolean;
  readonly locationType: string;
  /** Active retention claims holding the copy now. */
  readonly retainedBy: readonly string[];
  /** Members of this plan recorded KEPT so far (including the one recorded by this call). */
  readonly kept: number;
  /** Members of this plan with an outcome so far (including the one recorded by this call). */
  readonly accounted: number;
  readonly members: number;
}

function textArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string' && value.startsWith('{')) {
    return value
      .slice(1, -1)
      .split(',')
      .filter((v) => v !== '')
      .map((v) => v.replace(/^"(.*)"$/, '$1'));
  }
  return [];
}

/**
 * One step of a running deletion, in ONE statement: records the previous member's outcome (only
 * under the caller's lease epoch), renews the lease, and reads the facts the next unlink depends
 * on — the archive copy still PRESENT with the planned digest, its operation still COMPLETED, its
 * last verification VERIFIED with the planned whole-object digest, the policy's protected prefixes
 * and cleaned location types as they are now, the copy's retention claims. With `finish`, once
 * every member has an outcome and none was kept, it also appends the DELETED archive record row
 * (once). A deleter that lost its lease records nothing and learns it here.
 */
export async function deletionStep(
  exec: Executor,
  input: {
    deletionId: string;
    epoch: number;
    holder: string;
    leaseMs: number;
    previous?: OutcomeInput;
    finish?: boolean;
  },
): Promise<DeletionStepFacts> {
  const p = input.previous;
  const [row] = await exec.execute(sql`
    with d as (select * from copy_deletion where id = ${input.deletionId}::uuid),
    renew as (
      update copy_deletion x set lease_until = now() + ${input.leaseMs}::int * interval '1 millisecond'
      from d where x.id = d.id and d.epoch = ${input.epoch}::int and d.holder = ${input.holder}
      returning x.id
    ),
    prev as (
      insert into copy_deletion_outcome (deletion_id, seq, outcome, reason, epoch, by)
      select renew.id, ${p?.seq ?? 0}::int, ${p?.outcome ?? 'KEPT'}, ${p?.reason ?? null},
        ${input.epoch}::int, ${input.holder}
      from renew where ${p !== undefined}
      on conflict do nothing
      returning seq, outcome
    ),
    c as (
      select pc.id, pc.status, l.location_type from physical_copy pc
      join data_location l on l.id = pc.location_id join d on pc.id = d.physical_copy_id
    ),
    a as (select a.status, a.checksum from physical_copy a join d on a.id = d.archive_copy_id),
    o as (select o.status from operation o join d on o.id = d.archive_operation_id),
    v as (
      select r.state, r.object_sha256 from archive_record r join d on r.operation_id = d.archive_operation_id
      where r.state in ('VERIFIED', 'VERIFY_FAILED') order by r.id desc limit 1
    ),
    pol as (select * from deletion_policy where name = 'default'),
    counts as (
      select
        (select count(*) from copy_deletion_member m, d where m.deletion_id = d.id)::int as members,
        ((select count(*) from copy_deletion_outcome x, d where x.deletion_id = d.id)
          + (select count(*) from prev))::int as accounted,
        ((select count(*) from copy_deletion_outcome x, d where x.deletion_id = d.id and x.outcome = 'KEPT')
          + (select count(*) from prev where outcome = 'KEPT'))::int as kept
    ),
    fin as (
      insert into archive_record (operation_id, generation, state, by, archive_key, object_version,
        object_sha256, content_sha256, deletion_id, detail)
      select d.archive_operation_id,
        coalesce((select max(generation) from operation_replan r where r.operation_id = d.archive_operation_id), 1),
        'DELETED', ${input.holder}, vr.archive_key, vr.object_version, vr.object_sha256,
        vr.content_sha256, d.id, jsonb_build_object('members', counts.members, 'copyId', d.physical_copy_id)
      from d, counts, renew, lateral (
        select * from archive_record r where r.operation_id = d.archive_operation_id
          and r.state = 'VERIFIED' order by r.id desc limit 1
      ) vr
      where ${input.finish === true} and counts.accounted = counts.members and counts.kept = 0
        and not exists (select 1 from archive_record r where r.deletion_id = d.id and r.state = 'DELETED')
    )
    select exists (select 1 from renew) as lease_held,
      (select location_type from c) as location_type,
      coalesce((select
        a.status = 'PRESENT' and a.checksum = d.archive_digest and o.status = 'COMPLETED'
        and v.state = 'VERIFIED' and v.object_sha256 = d.archive_object_sha256
        from d left join a on true left join o on true left join v on true), false) as archive_ok,
      (select case
        when a.status is null then 'the archive copy no longer exists'
        when a.status <> 'PRESENT' then 'the archive copy is ' || a.status
        when a.checksum is distinct from d.archive_digest then 'the archive copy''s digest is ' || coalesce(a.checksum, 'unknown') || ', planned ' || d.archive_digest
        when o.status is distinct from 'COMPLETED' then 'the archive operation is ' || coalesce(o.status, 'gone')
        when v.state is distinct from 'VERIFIED' then 'the archive''s last verification failed'
        when v.object_sha256 is distinct from d.archive_object_sha256 then 'the archive''s verified object digest is ' || v.object_sha256 || ', planned ' || d.archive_object_sha256
        else null end
        from d left join a on true left join o on true left join v on true) as archive_problem,
      coalesce((select protected_prefixes from pol), '{}') as protected_prefixes,
      coalesce((select (select location_type from c) = any(clean_location_types) from pol), false) as cleaned,
      array(
        select distinct h.id::text from c cross join lateral (${activeClaimsOn(sql`c.id`)}) h
      ) as retained_by,
      (select kept from counts) as kept,
      (select accounted from counts) as accounted,
      (select members from counts) as members`);
  return {
    leaseHeld: row?.lease_held === true,
    archiveOk: row?.archive_ok === true,
    archiveProblem: row?.archive_problem == null ? null : String(row.archive_problem),
    protectedPrefixes: textArray(row?.protected_prefixes),
    cleaned: row?.cleaned === true,
    locationType: String(row?.location_type ?? ''),
    retainedBy: textArray(row?.retained_by),
    kept: Number(row?.kept ?? 0),
    accounted: Number(row?.accounted ?? 0),
    members: Number(row?.members ?? 0),
  };
}
