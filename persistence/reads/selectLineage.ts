import { sql } from 'drizzle-orm';
import type { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { Executor } from '../openDatabase.ts';

/** One step of lineage: a copy, the operation it was reached through, and the one beyond it. */
export interface LineageLink {
  /** 1 for the operation's own inputs (up) or outputs (down), 2 for the next, … */
  readonly depth: number;
  /** The operation this copy is an input (up) or output (down) of. */
  readonly via: string;
  readonly copy: {
    readonly id: string;
    readonly artifactType: string;
    readonly artifactId: string;
    readonly artifactName: string | null;
    /** `site/name` of its location. */
    readonly location: string;
    readonly status: string;
  };
  /** The operation that produced the copy (up) or consumed it (down); null when none did. */
  readonly operation: {
    readonly id: string;
    readonly kind: OperationKind;
    readonly status: OperationStatus;
  } | null;
}

/**
 * Lineage of an operation through copies, never operation to operation: up (the copies it
 * consumed, the operations that produced them, their inputs, …) or down (the copies it produced,
 * the operations that consumed them, …), at most `maxDepth` steps, each by the link tables'
 * indexes.
 *
 * @example
 * ```ts
 * const up = await selectLineage(database, operationId, 'up');
 * up.filter((l) => l.depth === 1).map((l) => l.copy.location); // where its inputs are
 * ```
 */
export async function selectLineage(
  exec: Executor,
  operationId: string,
  direction: 'up' | 'down',
  maxDepth = 6,
): Promise<LineageLink[]> {
  // up: walk inputs, then who produced them; down: walk outputs, then who consumed them.
  const [near, far] =
    direction === 'up'
      ? [sql.raw('operation_input'), sql.raw('operation_output')]
      : [sql.raw('operation_output'), sql.raw('operation_input')];
  const rows = await exec.execute(sql`
    with recursive walk(depth, operation_id) as (
      select 0, ${operationId}::uuid
      union
      select w.depth + 1, f.operation_id
      from walk w
      join ${near} n on n.operation_id = w.operation_id
      join ${far} f on f.physical_copy_id = n.physical_copy_id
      where w.depth < ${maxDepth - 1}
    )
    select distinct w.depth + 1 as depth, w.operation_id as via, c.id as copy_id, c.artifact_type,
      c.artifact_id, c.status as copy_status, l.site, l.name,
      coalesce(rf.name, rp.name, d.name) as artifact_name,
      o.id as op_id, o.kind as op_kind, o.status as op_status
    from walk w
    join ${near} n on n.operation_id = w.operation_id
    join physical_copy c on c.id = n.physical_copy_id
    left join data_location l on l.id = c.location_id
    left join raw_data_file rf on c.artifact_type = 'raw_data_file' and rf.id = c.artifact_id
    left join raw_data_package rp on c.artifact_type = 'raw_data_package' and rp.id = c.artifact_id
    left join data_transfer_package d on c.artifact_type = 'data_transfer_package' and d.id = c.artifact_id
    left join ${far} f on f.physical_copy_id = c.id
    left join operation o on o.id = f.operation_id
    order by depth, via, copy_id, op_id`);
  return rows.map((r) => ({
    depth: Number(r.depth),
    via: String(r.via),
    copy: {
      id: String(r.copy_id),
      artifactType: String(r.artifact_type),
      artifactId: String(r.artifact_id),
      artifactName: r.artifact_name == null ? null : String(r.artifact_name),
      location: r.site == null ? '?' : `${String(r.site)}/${String(r.name)}`,
      status: String(r.copy_status),
    },
    operation:
      r.op_id == null
        ? null
        : {
            id: String(r.op_id),
            kind: r.op_kind as OperationKind,
            status: r.op_status as OperationStatus,
          },
  }));
}
