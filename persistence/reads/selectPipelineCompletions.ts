import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { CompletedOperation, StageOutput } from '../../machines/pipelineFacts.ts';
import type { Executor } from '../openDatabase.ts';
import { uuidArray } from '../sql/selectOperations.ts';
import { transitionsAfterCursor } from '../sql/transitionsAfterCursor.ts';
import { SUBTYPE_SPEC } from '../subtypeFields.ts';

/**
 * A page of the transition history past `after` (and the `gaps` asked for again), with the
 * operations its COMPLETE transitions completed: kind, target location, the source location of a
 * move, their output copies and the rollback each was created for. An operation a rollback
 * superseded is left out: its completion no longer starts anything. `ids` are every transition id read, for the cursor.
 *
 * @example
 * ```ts
 * const { ids, completed } = await selectPipelineCompletions(database, cursor.after, cursor.gaps(now), 256);
 * ```
 */
export async function selectPipelineCompletions(
  exec: Executor,
  after: number,
  gaps: readonly number[],
  limit: number,
): Promise<{ ids: number[]; completed: CompletedOperation[] }> {
  const read = await exec.execute(
    transitionsAfterCursor(after, gaps, limit, sql`id, event, operation_id`),
  );
  const ids = read.map((r) => Number(r.id)).sort((a, b) => a - b);
  const done = [
    ...new Set(read.filter((r) => r.event === 'COMPLETE').map((r) => String(r.operation_id))),
  ];
  if (done.length === 0) return { ids, completed: [] };
  const list = uuidArray(done);
  const ops = await exec.execute(sql`
    select id, kind, target_location_id, rollback_id from operation
    where id = any(${list}::uuid[]) and status = 'COMPLETED' and target_location_id is not null
      and superseded_by is null`);
  const moves = Object.values(SUBTYPE_SPEC).filter((s) => s.byKey.has('sourceLocationId'));
  const sources = new Map<string, string>();
  for (const spec of moves) {
    const rows = await exec.execute(sql`
      select operation_id, source_location_id from ${sql.raw(spec.table)}
      where operation_id = any(${list}::uuid[])`);
    for (const r of rows) sources.set(String(r.operation_id), String(r.source_location_id));
  }
  const copies = await exec.execute(sql`
    select oo.operation_id, c.id, c.artifact_type, c.artifact_id, c.location_id, c.status
    from operation_output oo join physical_copy c on c.id = oo.physical_copy_id
    where oo.operation_id = any(${list}::uuid[])
    order by c.id`);
  const outputs = new Map<string, StageOutput[]>();
  for (const c of copies) {
    const of = String(c.operation_id);
    outputs.set(of, [
      ...(outputs.get(of) ?? []),
      {
        copyId: String(c.id),
        artifactType: String(c.artifact_type),
        artifactId: String(c.artifact_id),
        locationId: String(c.location_id),
        present: c.status === 'PRESENT',
      },
    ]);
  }
  const byId = new Map(ops.map((o) => [String(o.id), o]));
  const completed = done.flatMap((id): CompletedOperation[] => {
    const o = byId.get(id);
    if (o === undefined) return [];
    const source = sources.get(id);
    return [
      {
        id,
        kind: o.kind as OperationKind,
        targetLocationId: String(o.target_location_id),
        fields: source === undefined ? {} : { sourceLocationId: source },
        outputs: outputs.get(id) ?? [],
        rollbackId: o.rollback_id == null ? null : String(o.rollback_id),
      },
    ];
  });
  return { ids, completed };
}
