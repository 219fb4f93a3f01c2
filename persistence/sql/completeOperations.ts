import { sql } from 'drizzle-orm';
import type { Executor } from '../openDatabase.ts';
import type { TransitionWrite } from '../planTransition.ts';
import { recordsetJson } from './recordsetJson.ts';

/** What a completion's recordset reads of a planned transition. */
const COMPLETE_COLUMNS = [
  'id',
  'expected_version',
  'status',
  'attempt',
  'retry_count',
  'snapshot',
  'not_before',
  'worker_id',
  'finished_at',
  't_from',
  't_event',
  't_attempt',
  't_by',
  't_reason',
  't_at',
] as const satisfies readonly (keyof TransitionWrite)[];

/**
 * A copy's identity as one text (`type|artifact|location`, uuids as Postgres prints them), from the
 * columns of the row `prefix` names: the key the statement maps outputs to their copies by.
 */
const copyKey = (prefix: string) =>
  sql.raw(`${prefix}artifact_type || '|' || ${prefix}artifact_id || '|' || ${prefix}location_id`);

/**
 * Joins the row `row` names (its `artifact_type`, `artifact_id`, `location_id`) to its live copy as
 * `pc` (`id`, `location_id`), looked up by artifact: `offset 0` keeps the location condition out
 * of the probe, or Postgres, with statistics younger than the table, may probe by location and
 * read every live copy there (an archive location holds them all).
 */
const liveCopyOf = (row: string) =>
  sql.raw(`join lateral (
        select pc.id, pc.location_id from physical_copy pc
        where pc.artifact_type = ${row}.artifact_type and pc.artifact_id = ${row}.artifact_id
          and pc.status <> 'DELETED'
        offset 0
      ) pc on pc.location_id = ${row}.location_id`);

/** One output copy of one completing operation (recordset row). */
export interface OutputCopyInsert {
  operation_id: string;
  artifact_type: string;
  artifact_id: string;
  location_id: string;
  path: string | null;
  checksum: string | null;
  size: number | null;
}

export interface CompletedRow {
  readonly id: string;
  readonly version: number;
  /** Output copies this statement inserted. */
  readonly created: number;
  /** Output links written (new copies plus live copies that were already there). */
  readonly linked: number;
}

/**
 * Completes N operations in ONE statement (so atomically, without an interactive transaction):
 * the compare-and-set to COMPLETED (clearing `last_error`: an earlier attempt's failure stays in
 * the transitions and breadcrumbs) and its transition row, then — only for rows that won — their
 * output copies with `ON CONFLICT DO NOTHING` on the live-copy key (a conflict means the copy is
 * already there: done, not an error), the copy subtype rows, and the `operation_output` links to
 * the new or already-present copies.
 *
 * Every step is linear in the batch and independent of how many copies are stored: the live
 * copies already there are looked up once per distinct output key, by artifact (`liveCopyOf`),
 * and the outputs find their copies through one jsonb map
 * built once, not by a join the planner may run as a nested loop over the batch. The statement
 * returns the written rows, the keys of the copies it created and its links as rows of their own,
 * counted per operation here. With a semi-join re-run per output and a probe by location, a batch
 * of 100 distinct outputs took 0.87 s once the location held 400 copies; joining the outputs with
 * themselves once made 255 completions of one copy sort 65,025 rows.
 *
 * A live copy committed by a concurrent writer after this statement began is invisible to it, so
 * its link is missing from `linked`; `linkExistingOutputs` adds it in a next statement.
 */
export async function completeOperations(
  exec: Executor,
  writes: readonly TransitionWrite[],
  outputs: readonly OutputCopyInsert[],
): Promise<CompletedRow[]> {
  if (writes.length === 0) return [];
  const rows = await exec.execute<{ r: string; id: unknown; version: unknown; key: unknown }>(
    sql`
    with i as (
      select * from jsonb_to_recordset(${recordsetJson(writes, COMPLETE_COLUMNS)}::jsonb) as i(
        id uuid, expected_version int, status text, attempt int, retry_count int, snapshot jsonb,
        not_before timestamptz, worker_id text, finished_at timestamptz,
        t_from text, t_event text, t_attempt int, t_by text, t_reason text, t_at timestamptz)
    ),
    u as (
      update operation o set
        status = i.status, attempt = i.attempt, retry_count = i.retry_count,
        snapshot = i.snapshot, not_before = i.not_before, worker_id = i.worker_id,
        finished_at = i.finished_at, status_changed_at = i.t_at, version = o.version + 1,
        last_error = null
      from i
      where o.id = i.id and o.version = i.expected_version and o.attempt = i.t_attempt
      returning o.id, o.version
    ),
    t as (
      insert into operation_transition
        (operation_id, from_status, to_status, event, attempt, by, reason, at)
      select i.id, i.t_from, i.status, i.t_event, i.t_attempt, i.t_by, i.t_reason, i.t_at
      from i join u on u.id = i.id
    ),
    x as (
      select x.*, ${copyKey('x.')} as copy_key
      from jsonb_to_recordset(${recordsetJson(outputs)}::jsonb) as x(
        operation_id uuid, artifact_type text, artifact_id uuid, location_id uuid, path text,
        checksum text, size bigint)
      join u on u.id = x.operation_id
    ),
    c as (
      insert into physical_copy (artifact_type, artifact_id, location_id, path, checksum, size)
      select artifact_type, artifact_id, location_id, path, checksum, size from x
      on conflict (artifact_type, artifact_id, location_id) where status <> 'DELETED' do nothing
      returning id, artifact_type, artifact_id, ${copyKey('')} as copy_key
    ),
    c1 as (
      insert into raw_data_file_physical_copy (physical_copy_id, raw_data_file_id)
      select id, artifact_id from c where artifact_type = 'raw_data_file'
    ),
    c2 as (
      insert into raw_data_package_physical_copy (physical_copy_id, raw_data_package_id)
      select id, artifact_id from c where artifact_type = 'raw_data_package'
    ),
    c3 as (
      insert into data_transfer_package_physical_copy (physical_copy_id, data_transfer_package_id)
      select id, artifact_id from c where artifact_type = 'data_transfer_package'
    ),
    d as materialized (
      select distinct copy_key, artifact_type, artifact_id, location_id from x
    ),
    e as materialized (
      select pc.id, d.copy_key from d
      ${liveCopyOf('d')}
    ),
    k as materialized (
      select jsonb_object_agg(copy_key, id) as ids
      from (select copy_key, id from c union all select copy_key, id from e) k
    ),
    l as (
      insert into operation_output (operation_id, physical_copy_id)
      select distinct x.operation_id, (k.ids ->> x.copy_key)::uuid
      from x cross join k
      where k.ids ? x.copy_key
      on conflict do nothing
      returning operation_id
    )
    select 'u' as r, u.id, u.version, null as key from u
    union all
    select 'c', null, null, c.copy_key from c
    union all
    select 'l', l.operation_id, null, null from l`,
  );
  // The same key as copyKey: Postgres prints a uuid in lower case; the caller's may not be.
  const key = (o: OutputCopyInsert) =>
    `${o.artifact_type}|${o.artifact_id.toLowerCase()}|${o.location_id.toLowerCase()}`;
  const createdKeys = new Set<string>();
  const linked = new Map<string, number>();
  for (const r of rows) {
    if (r.r === 'c') createdKeys.add(String(r.key));
    else if (r.r === 'l') linked.set(String(r.id), (linked.get(String(r.id)) ?? 0) + 1);
  }
  const created = new Map<string, number>();
  for (const o of outputs) {
    if (createdKeys.has(key(o)))
      created.set(o.operation_id, (created.get(o.operation_id) ?? 0) + 1);
  }
  return rows
    .filter((r) => r.r === 'u')
    .map((r) => ({
      id: String(r.id),
      version: Number(r.version),
      created: created.get(String(r.id)) ?? 0,
      linked: linked.get(String(r.id)) ?? 0,
    }));
}

/**
 * Links operations to live output copies that exist now (committed by a concurrent completion
 * this operation's own statement could not see). Idempotent. Looks each copy up by artifact
 * (`liveCopyOf`).
 */
export async function linkExistingOutputs(
  exec: Executor,
  outputs: readonly OutputCopyInsert[],
): Promise<number> {
  if (outputs.length === 0) return 0;
  const rows = await exec.execute<{ n: number }>(sql`
    with x as (
      select * from jsonb_to_recordset(${recordsetJson(outputs)}::jsonb) as x(
        operation_id uuid, artifact_type text, artifact_id uuid, location_id uuid)
    ),
    l as (
      insert into operation_output (operation_id, physical_copy_id)
      select x.operation_id, pc.id from x
      ${liveCopyOf('x')}
      on conflict do nothing
      returning 1
    )
    select count(*)::int as n from l`);
  return Number(rows[0]?.n ?? 0);
}
