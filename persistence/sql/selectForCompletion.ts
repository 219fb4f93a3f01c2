import { sql } from 'drizzle-orm';
import type { ContractFacts } from '../../machines/missingOutputs.ts';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import { membersFieldOf, needsVerifiedArchive } from '../../machines/outputContract.ts';
import { OPERATION_COLUMNS, type OperationRecord, toOperationRecord } from '../OperationRecord.ts';
import type { Executor } from '../openDatabase.ts';
import { SUBTYPE_SPEC } from '../subtypeFields.ts';
import { uuidArray } from './selectOperations.ts';

/** An operation's base row and what its output contract is checked against. */
export interface CompletionRow {
  readonly record: OperationRecord;
  readonly facts: ContractFacts;
}

const quote = (value: string) => `'${value.replaceAll("'", "''")}'`;
const ident = (value: string) => `"${value.replaceAll('"', '""')}"`;

function columnOf(kind: OperationKind, key: string): string {
  const field = SUBTYPE_SPEC[kind].fields.find((f) => f.key === key);
  if (field === undefined) {
    throw new Error(`the output contract of ${kind} names ${key}, which its subtype lacks`);
  }
  return field.column;
}

/** The subtype row of the operation's own kind, as jsonb: one primary-key lookup per row. */
const SUBTYPE = `case o.kind ${OPERATION_KINDS.map(
  (k) =>
    `when ${quote(k)} then (select to_jsonb(s) from ${ident(SUBTYPE_SPEC[k].table)} s where s.operation_id = o.id)`,
).join(' ')} end`;

/**
 * For the kinds whose contract needs a transfer package's members: their ids, through the index on
 * `raw_data_package.data_transfer_package_id`. Other kinds read nothing more.
 */
const MEMBERS = (() => {
  const arms = OPERATION_KINDS.flatMap((k) => {
    const key = membersFieldOf(k);
    if (key === undefined) return [];
    return [
      `when ${quote(k)} then (select coalesce(jsonb_agg(p.id order by p.id), '[]'::jsonb)
         from raw_data_package p where p.data_transfer_package_id = (select s.${ident(columnOf(k, key))}
         from ${ident(SUBTYPE_SPEC[k].table)} s where s.operation_id = o.id))`,
    ];
  });
  return arms.length === 0 ? `'[]'::jsonb` : `case o.kind ${arms.join(' ')} else '[]'::jsonb end`;
})();

/** The archive record's states written before the archive completes (no deletion's). */
const ARCHIVE_SIDE = ['PLANNED', 'UPLOADED', 'CONFLICT', 'READ_BACK', 'VERIFIED', 'VERIFY_FAILED'];

/**
 * For the kinds whose contract needs a VERIFIED archive record: the last archive-side row of the
 * operation's record (state and package digest), through `archive_record_operation_idx`.
 */
const ARCHIVE = (() => {
  const kinds = OPERATION_KINDS.filter(needsVerifiedArchive);
  if (kinds.length === 0) return 'null::jsonb';
  return `case when o.kind in (${kinds.map(quote).join(', ')}) then coalesce((
      select jsonb_build_object('state', r.state, 'contentSha256', r.content_sha256)
      from archive_record r where r.operation_id = o.id and r.state in (${ARCHIVE_SIDE.map(quote).join(', ')})
      order by r.id desc limit 1), '{"state": null, "contentSha256": null}'::jsonb) end`;
})();

const SELECT = `select ${OPERATION_COLUMNS}, ${SUBTYPE} as contract_subtype, ${MEMBERS} as contract_members,
  ${ARCHIVE} as contract_archive
  from operation o where o.id = any(`;

function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

function factsOf(
  kind: OperationKind,
  subtype: unknown,
  members: unknown,
  archive: unknown,
): ContractFacts {
  const row = (json(subtype) ?? {}) as Record<string, unknown>;
  const fields: Record<string, string | null> = {};
  for (const f of SUBTYPE_SPEC[kind].fields) {
    const v = row[f.column];
    fields[f.key] = v == null ? null : String(v);
  }
  const ids = json(members);
  const record = json(archive) as { state: string | null; contentSha256: string | null } | null;
  return {
    fields,
    members: Array.isArray(ids) ? ids.map(String) : [],
    ...(record === null || record === undefined ? {} : { archive: record }),
  };
}

/**
 * Loads base rows by id with the facts their output contract is checked against (the subtype's
 * fields; for an unpack, the raw data packages recorded in its transfer package; for a long-term
 * archive, the last archive-side row of its archive record), in ONE
 * statement: the completion's own read, so the check costs no statement of its own.
 *
 * @example
 * ```ts
 * const rows = await selectForCompletion(database, ids);
 * missingOutputs(row.record.kind, row.facts, outputs);
 * ```
 */
export async function selectForCompletion(
  exec: Executor,
  ids: readonly string[],
): Promise<Map<string, CompletionRow>> {
  if (ids.length === 0) return new Map();
  const rows = await exec.execute(sql`${sql.raw(SELECT)}${uuidArray(ids)}::uuid[])`);
  return new Map(
    rows.map((r) => {
      const record = toOperationRecord(r);
      return [
        record.id,
        {
          record,
          facts: factsOf(record.kind, r.contract_subtype, r.contract_members, r.contract_archive),
        },
      ];
    }),
  );
}
