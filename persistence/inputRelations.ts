import { sql } from 'drizzle-orm';
import type { ArtifactType } from '../machines/ArtifactType.ts';
import { checkId } from './applyEvents.ts';
import type { ArtifactRef } from './LineageRepository.ts';
import type { Executor, Row } from './openDatabase.ts';
import type { InputRelations } from './publicRecords.ts';

export type { InputRelations } from './publicRecords.ts';

const ref = (type: ArtifactType, id: unknown, name: unknown): ArtifactRef => ({
  type,
  id: String(id),
  name: String(name),
});

function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

function toRelations(r: Row): InputRelations {
  const type = r.artifact_type as ArtifactType;
  const memberType: ArtifactType =
    type === 'data_transfer_package' ? 'raw_data_package' : 'raw_data_file';
  const partOfType: ArtifactType =
    type === 'raw_data_file' ? 'raw_data_package' : 'data_transfer_package';
  const members = (json(r.members) ?? []) as { id: string; name: string }[];
  return {
    copyId: String(r.copy_id),
    locationId: String(r.location_id),
    path: r.path == null ? null : String(r.path),
    artifact: ref(type, r.artifact_id, r.artifact_name),
    partOf: r.part_of_id == null ? null : ref(partOfType, r.part_of_id, r.part_of_name),
    members: members.map((m) => ref(memberType, m.id, m.name)),
  };
}

/**
 * Every input copy of an operation with its artifact's relations — the raw data packages a data
 * transfer package holds, the files of a raw data package, the package a file or a package belongs
 * to — in ONE statement, each step through an index (`operation_input`'s key, the artifact
 * primary keys, `raw_data_package_dtp_idx`, `raw_data_file_package_idx`). Handlers reach it as
 * `ctx.relations()`.
 *
 * @example
 * ```ts
 * const [bundle] = await inputRelations(database, operationId);
 * bundle?.members.map((p) => p.id); // the raw data packages recorded in the transfer package
 * ```
 */
export async function inputRelations(
  exec: Executor,
  operationId: string,
): Promise<InputRelations[]> {
  const id = checkId(operationId);
  const rows = await exec.execute(sql`
    select c.id as copy_id, c.location_id, c.path, c.artifact_type, c.artifact_id,
      coalesce(f.name, p.name, d.name) as artifact_name,
      coalesce(fp.id, pd.id) as part_of_id, coalesce(fp.name, pd.name) as part_of_name,
      case c.artifact_type
        when 'data_transfer_package' then (
          select coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'name', m.name)
            order by m.name, m.id), '[]'::jsonb)
          from raw_data_package m where m.data_transfer_package_id = c.artifact_id)
        when 'raw_data_package' then (
          select coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'name', m.name)
            order by m.name, m.id), '[]'::jsonb)
          from raw_data_file m where m.raw_data_package_id = c.artifact_id)
        else '[]'::jsonb
      end as members
    from operation_input i
    join physical_copy c on c.id = i.physical_copy_id
    left join raw_data_file f on c.artifact_type = 'raw_data_file' and f.id = c.artifact_id
    left join raw_data_package fp on fp.id = f.raw_data_package_id
    left join raw_data_package p on c.artifact_type = 'raw_data_package' and p.id = c.artifact_id
    left join data_transfer_package pd on pd.id = p.data_transfer_package_id
    left join data_transfer_package d
      on c.artifact_type = 'data_transfer_package' and d.id = c.artifact_id
    where i.operation_id = ${id}::uuid
    order by c.artifact_type, artifact_name, c.id`);
  return rows.map(toRelations);
}
