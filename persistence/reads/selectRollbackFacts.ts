import { sql } from 'drizzle-orm';
import { ArtifactType } from '../../machines/ArtifactType.ts';
import { OPERATION_KINDS, type OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import type { RollbackCopy, RollbackFacts } from '../../machines/planRollback.ts';
import { toDate } from '../OperationRecord.ts';
import type { Executor, Row } from '../openDatabase.ts';
import { familyOperations, uuidArray } from '../sql/familyOperations.ts';
import { SUBTYPE_SPEC } from '../subtypeFields.ts';

const copyOf = (r: Row): RollbackCopy => ({
  id: String(r.id),
  artifactType: String(r.artifact_type),
  artifactId: String(r.artifact_id),
  locationId: String(r.location_id),
  location: `${String(r.site)}/${String(r.name)}`,
  status: String(r.status),
});

const COPY_COLUMNS = sql`c.id, c.artifact_type, c.artifact_id, c.location_id, l.site, l.name, c.status`;

/**
 * What a rollback of `artifactId` decides from (`planRollback`): the artifact (a raw data package
 * with its bundle, or a data transfer package with its members), every operation of its family
 * (`familyOperations`, staging left out) with its subtype fields and its input and output copies,
 * and the live copies of every artifact those operations read. Undefined when the id names no
 * raw data package or data transfer package. With `lock`, the family's operations are read
 * `FOR UPDATE`, so no retry or completion changes them until the rollback's transaction ends.
 *
 * @example
 * ```ts
 * const facts = await selectRollbackFacts(tx, packageId, { lock: true });
 * ```
 */
export async function selectRollbackFacts(
  exec: Executor,
  artifactId: string,
  options: { readonly lock: boolean },
): Promise<RollbackFacts | undefined> {
  const [pkg] = await exec.execute(
    sql`select id, data_transfer_package_id from raw_data_package where id = ${artifactId}::uuid`,
  );
  let artifact: RollbackFacts['artifact'];
  if (pkg !== undefined) {
    const bundleId =
      pkg.data_transfer_package_id == null ? null : String(pkg.data_transfer_package_id);
    const bundleMembers =
      bundleId === null
        ? []
        : (
            await exec.execute(
              sql`select id from raw_data_package where data_transfer_package_id = ${bundleId}::uuid order by id`,
            )
          ).map((m) => String(m.id));
    artifact = { type: ArtifactType.RAW_DATA_PACKAGE, id: artifactId, bundleId, bundleMembers };
  } else {
    const [bundle] = await exec.execute(
      sql`select id from data_transfer_package where id = ${artifactId}::uuid`,
    );
    if (bundle === undefined) return undefined;
    const members = await exec.execute(
      sql`select id from raw_data_package where data_transfer_package_id = ${artifactId}::uuid order by id`,
    );
    artifact = {
      type: ArtifactType.DATA_TRANSFER_PACKAGE,
      id: artifactId,
      members: members.map((m) => String(m.id)),
    };
  }
  // A raw data package's family takes its bundle-mates in: a rollback to a stage of the bundle
  // redoes their later stages too.
  const packages =
    artifact.type === ArtifactType.RAW_DATA_PACKAGE
      ? artifact.bundleMembers.length > 0
        ? artifact.bundleMembers
        : [artifact.id]
      : artifact.members;
  const bundles =
    artifact.type === ArtifactType.RAW_DATA_PACKAGE
      ? artifact.bundleId === null
        ? []
        : [artifact.bundleId]
      : [artifact.id];
  const family = sql`
    select o.id, o.kind, o.status, f.subject, o.target_location_id, o.superseded_by, o.created_at
    from ${familyOperations(packages, bundles, { staging: false })} f
    join operation o on o.id = f.operation_id
    order by o.id`;
  if (options.lock) {
    // Locked first, then read again: an operation a pipeline pass created from one of these while
    // the lock waited for it (its write holds its cause FOR SHARE) committed after the locking
    // statement's snapshot, and only a later statement sees it.
    await exec.execute(sql`${family} for update of o`);
  }
  const ops = await exec.execute(family);
  const ids = ops.map((o) => String(o.id));
  const list = uuidArray(ids);
  const fields = new Map<string, Record<string, string | null>>();
  for (const kind of OPERATION_KINDS) {
    const spec = SUBTYPE_SPEC[kind];
    if (!ops.some((o) => o.kind === kind)) continue;
    const rows = await exec.execute(sql`
      select * from ${sql.raw(spec.table)} where operation_id = any(${list})`);
    for (const r of rows) {
      fields.set(
        String(r.operation_id),
        Object.fromEntries(
          spec.fields.map((f) => [f.key, r[f.column] == null ? null : String(r[f.column])]),
        ),
      );
    }
  }
  const links = await exec.execute(sql`
    select 'in' as dir, x.operation_id, ${COPY_COLUMNS}
      from operation_input x join physical_copy c on c.id = x.physical_copy_id
      join data_location l on l.id = c.location_id
      where x.operation_id = any(${list})
    union all
    select 'out', x.operation_id, ${COPY_COLUMNS}
      from operation_output x join physical_copy c on c.id = x.physical_copy_id
      join data_location l on l.id = c.location_id
      where x.operation_id = any(${list})
    order by 3`);
  const linked = (id: string, dir: string) =>
    links.filter((l) => String(l.operation_id) === id && l.dir === dir).map(copyOf);
  const operations = ops.map((o) => {
    const id = String(o.id);
    return {
      id,
      kind: o.kind as OperationKind,
      status: o.status as OperationStatus,
      subjectId: String(o.subject),
      targetLocationId: o.target_location_id == null ? null : String(o.target_location_id),
      fields: fields.get(id) ?? {},
      inputs: linked(id, 'in'),
      outputs: linked(id, 'out'),
      supersededBy: o.superseded_by == null ? null : String(o.superseded_by),
      createdAt: (toDate(o.created_at) as Date).toISOString(),
    };
  });
  const read = [...new Set(links.filter((l) => l.dir === 'in').map((l) => String(l.artifact_id)))];
  const live = await exec.execute(sql`
    select ${COPY_COLUMNS} from physical_copy c join data_location l on l.id = c.location_id
    where c.artifact_id = any(${uuidArray(read)}) and c.status <> 'DELETED'
    order by c.id`);
  const liveCopies = new Map<string, RollbackCopy[]>();
  for (const r of live) {
    const c = copyOf(r);
    liveCopies.set(c.artifactId, [...(liveCopies.get(c.artifactId) ?? []), c]);
  }
  return { artifact, operations, liveCopies };
}
