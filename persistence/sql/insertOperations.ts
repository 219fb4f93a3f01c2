import { sql } from 'drizzle-orm';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import type { Executor } from '../openDatabase.ts';
import { SUBTYPE_SPEC } from '../subtypeFields.ts';
import { recordsetJson } from './recordsetJson.ts';

/** One new operation as the recordset of the insert statement sees it. */
export interface OperationInsert {
  id: string;
  kind: string;
  operation_type: string;
  location_type: string;
  /** The routed location's site and name (a site route), or null for a legacy route. */
  route_site: string | null;
  route_location: string | null;
  status: string;
  attempt: number;
  retry_count: number;
  max_retries: number;
  snapshot: unknown;
  machine_id: string;
  machine_version: number;
  xstate_version: string;
  group_id: string | null;
  /** The location the operation acts on, for its circuit breaker (see `SubtypeSpec`). */
  target_location_id: string;
  not_before: string | null;
  /** The operation's own deadline per attempt (ms), or null for its kind's. */
  deadline_ms: number | null;
  /** Higher is claimed first (see `machines/priority.ts`). */
  priority: number;
  created_at: string;
  /** Who created it, for the creation transition row. */
  created_by: string;
  /** Stage-specific fields by camelCase key, already validated for the kind. */
  fields: Record<string, unknown>;
  /** Physical copy ids the operation consumes. */
  inputs: string[];
}

// One insert per subtype table, each taking the rows of its own kind. Built from the schema, once
// per kind (a batch of one kind, the usual case, plans only its own table) and once for mixed
// batches, so each statement text (and its prepared plan) never changes.
function subtypeInsert(kind: OperationKind, n: number): string {
  const { table, fields } = SUBTYPE_SPEC[kind];
  const columns = ['operation_id', ...fields.map((f) => f.column)].join(', ');
  const values = [
    'i.id',
    ...fields.map((f) => `(i.fields->>'${f.key}')${f.type === 'uuid' ? '::uuid' : ''}`),
  ].join(', ');
  return `s${n} as (insert into ${table} (${columns}) select ${values} from i where i.kind = '${kind}')`;
}

const MIXED = OPERATION_KINDS.map(subtypeInsert).join(',\n');
const SINGLE = new Map(OPERATION_KINDS.map((k) => [k as string, subtypeInsert(k, 0)]));

/**
 * Creates N operations in ONE statement: base rows, their subtype rows, their inputs and their
 * creation transition rows. Atomic: a bad reference anywhere (23503) writes nothing at all.
 */
export async function insertOperations(
  exec: Executor,
  rows: readonly OperationInsert[],
): Promise<string[]> {
  if (rows.length === 0) return [];
  const kind = rows[0]?.kind as string;
  const subtypes = rows.every((r) => r.kind === kind) ? (SINGLE.get(kind) ?? MIXED) : MIXED;
  const result = await exec.execute<{ id: string }>(sql`
    with i as (
      select * from jsonb_to_recordset(${recordsetJson(rows)}::jsonb) as i(
        id uuid, kind text, operation_type text, location_type text, status text, attempt int,
        retry_count int, max_retries int, snapshot jsonb, machine_id text, machine_version int,
        xstate_version text, group_id uuid, target_location_id uuid, not_before timestamptz,
        deadline_ms int, priority smallint, created_at timestamptz,
        created_by text, fields jsonb, inputs jsonb, route_site text, route_location text)
    ),
    o as (
      insert into operation (id, kind, operation_type, location_type, status, attempt,
        retry_count, max_retries, snapshot, machine_id, machine_version, xstate_version, version,
        group_id, target_location_id, not_before, deadline_ms, priority, created_at,
        status_changed_at, route_site, route_location)
      select id, kind, operation_type, location_type, status, attempt, retry_count, max_retries,
        snapshot, machine_id, machine_version, xstate_version, 0, group_id, target_location_id,
        not_before, deadline_ms, priority, created_at, created_at, route_site, route_location
      from i
      returning id
    ),
    ${sql.raw(subtypes)},
    inp as (
      insert into operation_input (operation_id, physical_copy_id)
      select i.id, v.value::uuid from i cross join lateral jsonb_array_elements_text(i.inputs) v
    ),
    tr as (
      insert into operation_transition
        (operation_id, from_status, to_status, event, attempt, by, reason, at)
      select i.id, null, i.status, 'CREATE', i.attempt, i.created_by, null, i.created_at from i
    )
    select id from o`);
  return result.map((r) => String(r.id));
}
