import { type SQL, sql } from 'drizzle-orm';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import {
  OPERATION_STATUSES,
  type OperationError,
  type OperationStatus,
} from '../../machines/operationMachine.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { likeLiteral, uuidPrefixRange } from '../searchText.ts';
import { SUBTYPE_SPEC } from '../subtypeFields.ts';
import { operationErrorOf } from '../UnreadableValue.ts';

/** What to look for; every part optional, all given parts must match. */
export interface OperationSearch {
  readonly kind?: OperationKind | undefined;
  readonly status?: OperationStatus | undefined;
  /**
   * Matched, case-insensitively and literally (`%`, `_` and `\` are plain characters), against:
   * the operation's id (whole, a prefix, or the last hex digits a short id shows), the id (whole
   * or a prefix) or a part of the name of the package it acts on, and a part of its last error's
   * message or code.
   */
  readonly text?: string | undefined;
}

/** An operation as a list shows it. */
export interface OperationListRow {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly retryCount: number;
  readonly maxRetries: number;
  readonly workerId: string | null;
  readonly createdAt: Date;
  readonly lastError: OperationError | null;
}

/** An operation as the search lists it: a list row and the package it acts on. */
export interface OperationSearchRow extends OperationListRow {
  /** The package the operation acts on (its subtype's package field). */
  readonly package: {
    readonly type: 'raw_data_package' | 'data_transfer_package';
    readonly id: string;
    readonly name: string | null;
  } | null;
}

/** Where a page starts: after this (created at, id), newest first. */
export interface SearchCursor {
  readonly createdAt: Date;
  readonly id: string;
}

const LIVE: readonly OperationStatus[] = ['SCHEDULED', 'IN_PROGRESS'];

/** Which package table each kind's subtype names, and by which column. */
const PACKAGE_OF = OPERATION_KINDS.map((kind) => {
  const spec = SUBTYPE_SPEC[kind];
  const raw = spec.fields.some((f) => f.key === 'rawDataPackageId');
  return {
    kind,
    subtype: sql.raw(spec.table),
    column: sql.raw(raw ? 'raw_data_package_id' : 'data_transfer_package_id'),
    table: sql.raw(raw ? 'raw_data_package' : 'data_transfer_package'),
    type: raw ? ('raw_data_package' as const) : ('data_transfer_package' as const),
  };
});

/** The text predicate on row `o`, and the CTE of the operations of matching packages. */
function textMatch(text: string): { cte: SQL; where: SQL } {
  const pattern = `%${likeLiteral(text)}%`;
  const range = uuidPrefixRange(text);
  const idRange = (column: SQL) =>
    range === null ? sql`false` : sql`${column} between ${range[0]}::uuid and ${range[1]}::uuid`;
  const packages = PACKAGE_OF.map(
    (p) => sql`select x.operation_id from ${p.subtype} x join ${p.table} p on p.id = x.${p.column}
      where p.name ilike ${pattern} escape '\\' or ${idRange(sql`p.id`)}`,
  );
  // A short id is the last hex digits of an id.
  const suffix = /^[0-9a-f]{4,12}$/i.test(text)
    ? sql`o.id::text like ${`%${text.toLowerCase()}`}`
    : sql`false`;
  return {
    cte: sql`package_operations as (${sql.join(packages, sql` union all `)})`,
    where: sql`(${idRange(sql`o.id`)} or ${suffix}
      or o.id in (select operation_id from package_operations)
      or o.last_error->>'message' ilike ${pattern} escape '\\'
      or o.last_error->>'code' ilike ${pattern} escape '\\')`,
  };
}

/**
 * One page of operations, newest first (created at, then id, descending), after the previous
 * page's last row, filtered by kind, status and a free text (see `OperationSearch.text`). Without
 * text every branch is one backward range of an index: per kind and settled status the
 * (kind, status, created_at, id) index, and the live statuses (a bounded few) off the index of
 * live operations; the branches are merged and cut to the page. The text narrows each branch:
 * an error text cannot use an index, so a rare match reads the branch to its end.
 *
 * @example
 * ```ts
 * const page = await searchOperations(database, { status: 'FAILED', text: 'checksum' }, { limit: 50 });
 * ```
 */
export async function searchOperations(
  exec: Executor,
  search: OperationSearch,
  page: { readonly limit: number; readonly after?: SearchCursor | undefined },
): Promise<OperationSearchRow[]> {
  const kinds = search.kind === undefined ? OPERATION_KINDS : [search.kind];
  const statuses = search.status === undefined ? OPERATION_STATUSES : [search.status];
  const text = search.text === undefined ? undefined : textMatch(search.text);
  const after =
    page.after === undefined
      ? sql`true`
      : sql`(o.created_at, o.id) < (${page.after.createdAt.toISOString()}::timestamptz, ${page.after.id}::uuid)`;
  const matches = text?.where ?? sql`true`;
  const branch = (where: SQL) =>
    sql`(select o.id, o.created_at from operation o where ${where} and ${after} and ${matches}
      order by o.created_at desc, o.id desc limit ${page.limit})`;
  const branches: SQL[] = [];
  for (const kind of kinds) {
    for (const status of statuses.filter((s) => !LIVE.includes(s))) {
      // Spelled out so that the partial index matches in a generic plan too.
      branches.push(
        branch(
          sql`o.kind = ${kind} and o.status = ${status} and o.status not in ('SCHEDULED', 'IN_PROGRESS')`,
        ),
      );
    }
  }
  const live = statuses.filter((s) => LIVE.includes(s));
  if (live.length > 0) {
    branches.push(
      branch(sql`o.status in ('SCHEDULED', 'IN_PROGRESS')
        and o.status = any(${`{${live.join(',')}}`}::text[])
        and o.kind = any(${`{${kinds.join(',')}}`}::text[])`),
    );
  }
  const packageOf = PACKAGE_OF.map(
    (p) => sql`select ${p.type} as package_type, p.id as package_id, p.name as package_name
      from ${p.subtype} x join ${p.table} p on p.id = x.${p.column}
      where ${p.kind} = o.kind and x.operation_id = o.id`,
  );
  const rows = await exec.execute(sql`
    ${text === undefined ? sql`` : sql`with ${text.cte}`}
    select o.id, o.kind, o.status, o.attempt, o.retry_count, o.max_retries, o.worker_id,
      o.created_at, o.last_error, pk.package_type, pk.package_id, pk.package_name
    from (select id from (${sql.join(branches, sql` union all `)}) b
      order by b.created_at desc, b.id desc limit ${page.limit}) s
    join operation o on o.id = s.id
    left join lateral (${sql.join(packageOf, sql` union all `)} limit 1) pk on true
    order by o.created_at desc, o.id desc`);
  return rows.map((r) => ({
    ...operationListRowOf(r),
    package:
      r.package_id == null
        ? null
        : {
            type: r.package_type as 'raw_data_package' | 'data_transfer_package',
            id: String(r.package_id),
            name: r.package_name == null ? null : String(r.package_name),
          },
  }));
}

/** A selected `operation` row (id, kind, status, attempt, retries, worker, created, error) as a list shows it. */
function operationListRowOf(r: Row): OperationListRow {
  return {
    id: String(r.id),
    kind: r.kind as OperationKind,
    status: r.status as OperationStatus,
    attempt: Number(r.attempt),
    retryCount: Number(r.retry_count),
    maxRetries: Number(r.max_retries),
    workerId: r.worker_id == null ? null : String(r.worker_id),
    createdAt: toDate(r.created_at) as Date,
    lastError: r.last_error == null ? null : operationErrorOf(r.last_error),
  };
}
