import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { Executor } from '../openDatabase.ts';
import { SUBTYPE_SPEC } from '../subtypeFields.ts';

/** A (kind, subject, target location) a pipeline stage's operation is unique on. */
export interface StageKeyQuery {
  readonly kind: OperationKind;
  readonly subjectId: string;
  readonly locationId: string;
}

/**
 * Which of `keys` an operation exists for, in any status (created by a pipeline or submitted), not
 * counting one a rollback superseded (its stage is to be created again): each as
 * `kind|subject|location` (`stageKey`).
 *
 * @example
 * ```ts
 * const existing = await selectStageKeys(database, creations.map(keyOf));
 * ```
 */
export async function selectStageKeys(
  exec: Executor,
  keys: readonly StageKeyQuery[],
): Promise<Set<string>> {
  const found = new Set<string>();
  for (const kind of new Set(keys.map((k) => k.kind))) {
    const spec = SUBTYPE_SPEC[kind];
    const subject = spec.byKey.get('rawDataPackageId') ?? spec.byKey.get('dataTransferPackageId');
    if (subject === undefined) continue;
    const wanted = keys
      .filter((k) => k.kind === kind)
      .map((k) => ({ s: k.subjectId, l: k.locationId }));
    const rows = await exec.execute(sql`
      select distinct s.${sql.raw(subject.column)} as subject_id, o.target_location_id
      from jsonb_to_recordset(${JSON.stringify(wanted)}::jsonb) as w(s uuid, l uuid)
      join ${sql.raw(spec.table)} s on s.${sql.raw(subject.column)} = w.s
      join operation o on o.id = s.operation_id and o.kind = ${kind} and o.target_location_id = w.l
        and o.superseded_by is null`);
    for (const r of rows)
      found.add(`${kind}|${String(r.subject_id)}|${String(r.target_location_id)}`);
  }
  return found;
}
