import { sql } from 'drizzle-orm';
import { restoreOperationSnapshot } from '../machines/decide.ts';
import { queueName } from '../machines/routing.ts';
import { upgradeSnapshot } from '../machines/snapshotEnvelope.ts';
import { toCopyRecord } from './ArtifactRepository.ts';
import { checkId, notFound } from './applyEvents.ts';
import { JournalRepository } from './JournalRepository.ts';
import { OPERATION_COLUMNS, toOperationRecord } from './OperationRecord.ts';
import type { Database, Row } from './openDatabase.ts';
import type { OperationInspection } from './publicRecords.ts';
import { SUBTYPE_SPEC } from './subtypeFields.ts';
import { operationErrorProblem, rawJson, type UnreadableValue } from './UnreadableValue.ts';

export type { OperationInspection } from './publicRecords.ts';

/** What of the base row cannot be read as what its column holds. */
function unreadableOf(row: Row): UnreadableValue[] {
  const found: UnreadableValue[] = [];
  try {
    restoreOperationSnapshot(
      upgradeSnapshot({
        machineId: String(row.machine_id),
        machineVersion: Number(row.machine_version),
        xstateVersion: String(row.xstate_version),
        snapshot: row.snapshot,
      }),
    );
  } catch (err) {
    found.push({
      column: 'operation.snapshot',
      raw: rawJson(row.snapshot),
      reason: err instanceof Error ? err.message : String(err),
    });
  }
  const problem = row.last_error == null ? undefined : operationErrorProblem(row.last_error);
  if (problem !== undefined) {
    found.push({ column: 'operation.last_error', raw: rawJson(row.last_error), reason: problem });
  }
  return found;
}

/**
 * Gathers one operation with its subtype fields, input and output copies, transition history,
 * journal steps and failure breadcrumbs. `NOT_FOUND` when there is none. A damaged stored value
 * never fails the read: it is listed in `unreadable` with the row's text (a `last_error` that is
 * no error record reads as code `UNREADABLE`).
 *
 * @example
 * ```ts
 * const view = await inspectOperation(database, id);
 * view.transitions.map((t) => `${t.from} → ${t.to} (${t.event} by ${t.by})`);
 * ```
 */
export async function inspectOperation(
  database: Database,
  operationId: string,
): Promise<OperationInspection> {
  const id = checkId(operationId);
  const journal = new JournalRepository(database);
  const [row] = await database.execute(
    sql`select ${sql.raw(OPERATION_COLUMNS)} from operation o where o.id = ${id}::uuid`,
  );
  if (row === undefined) throw notFound(id);
  const record = toOperationRecord(row);
  const spec = SUBTYPE_SPEC[record.kind];
  const [subtype] = await database.execute(
    sql`select * from ${sql.identifier(spec.table)} where operation_id = ${id}::uuid`,
  );
  const fields: Record<string, string | null> = {};
  for (const f of spec.fields) {
    const v = subtype?.[f.column];
    fields[f.key] = v == null ? null : String(v);
  }
  const copies = await database.execute(sql`
    select 'in' as role, c.* from operation_input i join physical_copy c on c.id = i.physical_copy_id
      where i.operation_id = ${id}::uuid
    union all
    select 'out' as role, c.* from operation_output x join physical_copy c on c.id = x.physical_copy_id
      where x.operation_id = ${id}::uuid`);
  const [transitions, steps, failures] = await Promise.all([
    journal.listTransitions(id),
    journal.listSteps(id),
    journal.listFailures(id),
  ]);
  return {
    id: record.id,
    kind: record.kind,
    status: record.status,
    attempt: record.attempt,
    retryCount: record.retryCount,
    maxRetries: record.maxRetries,
    version: record.version,
    route: record.route,
    queue: queueName(record.route),
    groupId: record.groupId,
    workerId: record.workerId,
    notBefore: record.notBefore,
    createdAt: record.createdAt,
    scheduledAt: record.scheduledAt,
    startedAt: record.startedAt,
    finishedAt: record.finishedAt,
    deadlineMs: record.deadlineMs,
    priority: record.priority,
    lastError: record.lastError,
    envelope: record.envelope,
    fields,
    inputs: copies.filter((c) => c.role === 'in').map(toCopyRecord),
    outputs: copies.filter((c) => c.role === 'out').map(toCopyRecord),
    transitions,
    steps,
    failures,
    unreadable: unreadableOf(row),
  };
}
