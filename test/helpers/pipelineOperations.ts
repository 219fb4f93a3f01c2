import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import type { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import { registerSampleData, type SampleData } from '../../stages/sampleData.ts';
import { pathProblems } from '../actors/drillChecks.ts';
import { REPO_ROOT } from './opstateCli.ts';

/**
 * An operation as a pipeline test checks it: its `kind|subject|target location` key, and what a
 * rollback wrote on it and who created it.
 */
export interface KeyedOperation {
  readonly id: string;
  readonly kind: string;
  readonly status: string;
  readonly key: string;
  readonly supersededBy: string | null;
  readonly rollbackId: string | null;
  readonly createdBy: string;
}

/**
 * Every operation, in id order, as `kind|subject|target location` (the subject from its subtype
 * row) with what a rollback wrote on it and its creator: a pipeline creates each key once, which
 * a drill checks after its faults.
 *
 * @example
 * ```ts
 * const ops = await operationKeys(runtime.database);
 * expect(new Set(ops.map((o) => o.key)).size).toBe(ops.length);
 * ```
 */
export async function operationKeys(database: {
  execute: (q: ReturnType<typeof sql>) => Promise<Record<string, unknown>[]>;
}): Promise<KeyedOperation[]> {
  // One scalar lookup per subtype, not five left joins: on a test database's tables, never
  // analyzed, the planner multiplied the joins' default estimates to hundreds of thousands of rows,
  // the cost crossed jit_above_cost, and every call spent about 0.3 s compiling the query.
  const rows = await database.execute(sql`
    select o.id::text as id, o.kind, o.status, o.target_location_id::text as location,
      o.superseded_by::text as superseded_by, o.rollback_id::text as rollback_id,
      coalesce(
        (select r.raw_data_package_id from packaging_operation r where r.operation_id = o.id),
        (select d.data_transfer_package_id from bundling_operation d where d.operation_id = o.id),
        (select t.data_transfer_package_id from transfer_operation t where t.operation_id = o.id),
        (select u.data_transfer_package_id from unpack_operation u where u.operation_id = o.id),
        (select a.raw_data_package_id from long_term_archive_operation a
          where a.operation_id = o.id))::text as subject,
      (select by from operation_transition x where x.operation_id = o.id and x.event = 'CREATE')
        as created_by
    from operation o
    order by o.id`);
  return rows.map((r) => ({
    id: String(r.id),
    kind: String(r.kind),
    status: String(r.status),
    key: `${String(r.kind)}|${String(r.subject)}|${String(r.location)}`,
    supersededBy: r.superseded_by == null ? null : String(r.superseded_by),
    rollbackId: r.rollback_id == null ? null : String(r.rollback_id),
    createdBy: String(r.created_by),
  }));
}

/** The default pipeline's stage kinds, in run order. */
const STAGE_KINDS = [
  'raw_data_package',
  'data_transfer_package',
  'transfer',
  'unpack',
  'long_term_archive',
] as const;

/**
 * How many operations of each stage kind, in run order (packaging, bundling, transfer, unpack,
 * long-term archive).
 *
 * @example
 * ```ts
 * expect(perStageKind(ops)).toEqual([packages, bundles, bundles, bundles, packages]);
 * ```
 */
export function perStageKind(ops: readonly { readonly kind: string }[]): number[] {
  return STAGE_KINDS.map((kind) => ops.filter((o) => o.kind === kind).length);
}

/**
 * Writes a module exporting `defaultPipeline` over `site`'s source, buffer and archive (one
 * destination), importing the built package as an `opstate control-plane --pipeline` process
 * would; returns its path.
 *
 * @example
 * ```ts
 * const module = await writePipelineModule(dir, site);
 * dep.spawnCli(['control-plane', '--pipeline', module]);
 * ```
 */
export async function writePipelineModule(dir: string, site: string): Promise<string> {
  const module = join(dir, 'pipeline.mjs');
  const built = pathToFileURL(join(REPO_ROOT, 'dist', 'index.js')).href;
  await writeFile(
    module,
    `import { defaultPipeline } from '${built}';
export const pipeline = defaultPipeline({
  source: { site: '${site}', name: 'source' },
  destinations: [{ buffer: { site: '${site}', name: 'buffer' }, archive: { site: '${site}', name: 'archive' } }],
});
`,
  );
  return module;
}

/**
 * Registers `bundles` transfer packages of `perBundle` packages (two small files each) at one set
 * of `site`'s locations, under `storageDir`.
 *
 * @example
 * ```ts
 * const worlds = await registerBundles(runtime.artifacts, join(dir, 'storage'), { site, bundles: 5, perBundle: 10 });
 * ```
 */
export async function registerBundles(
  artifacts: ArtifactRepository,
  storageDir: string,
  shape: { readonly site: string; readonly bundles: number; readonly perBundle: number },
): Promise<SampleData[]> {
  const worlds: SampleData[] = [];
  for (let b = 0; b < shape.bundles; b++) {
    worlds.push(
      await registerSampleData(artifacts, storageDir, {
        site: shape.site,
        packageCount: shape.perBundle,
        filesPerPackage: 2,
        namePrefix: `b${b}-`,
        ...(worlds[0] === undefined ? {} : { locations: worlds[0].locations }),
      }),
    );
  }
  return worlds;
}

/**
 * Declares every package's files complete at its world's source: a declared pipeline's pass then
 * creates each packaging (nothing is submitted).
 *
 * @example
 * ```ts
 * await declareFilesComplete(runtime.artifacts, worlds);
 * ```
 */
export async function declareFilesComplete(
  artifacts: ArtifactRepository,
  worlds: readonly SampleData[],
): Promise<void> {
  for (const w of worlds) {
    for (const p of w.packages) {
      await artifacts.declareFilesComplete({
        rawDataPackageId: p.id,
        locationId: w.locations.source.id,
        by: 'drill',
      });
    }
  }
}

/**
 * What a pipeline drill promises at its end, as one list of problems (empty: none): `operations`
 * operations in all, one per (kind, subject, location), `perStage` of them per stage kind
 * (packaging, bundling, transfer, unpack, archive), each path a lifecycle path with exactly one
 * COMPLETE and no reset by a path `forbidden` names, and no artifact with two live copies at a
 * location.
 *
 * @example
 * ```ts
 * expect(await pipelineOutcomeProblems(rt.database, { operations: 26, perStage: [10, 2, 2, 2, 10] }), context).toEqual([]);
 * ```
 */
export async function pipelineOutcomeProblems(
  database: Database,
  expected: {
    readonly operations: number;
    readonly perStage: readonly number[];
    readonly forbidden?: readonly string[];
  },
): Promise<string[]> {
  const ops = await operationKeys(database);
  const problems: string[] = [];
  if (ops.length !== expected.operations) {
    problems.push(`${ops.length} operations, ${expected.operations} expected`);
  }
  const keys = new Set(ops.map((o) => o.key));
  if (keys.size !== ops.length) problems.push(`${ops.length - keys.size} operations doubled a key`);
  const stages = perStageKind(ops);
  if (stages.join() !== expected.perStage.join()) {
    problems.push(`per stage ${stages.join(', ')}, ${expected.perStage.join(', ')} expected`);
  }
  problems.push(
    ...(await pathProblems(
      database,
      ops.map((o) => o.id),
      expected.forbidden,
    )),
  );
  const doubled = await database.execute(sql`
    select artifact_type, artifact_id::text as artifact_id, location_id::text as location_id,
      count(*)::int as n
    from physical_copy where status <> 'DELETED'
    group by artifact_type, artifact_id, location_id having count(*) > 1`);
  for (const d of doubled) {
    problems.push(
      `${d.n} live copies of ${d.artifact_type} ${d.artifact_id} at location ${d.location_id}`,
    );
  }
  return problems;
}
