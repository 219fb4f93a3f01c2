import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import { deploymentPerTest, waitFor } from '../actors/harness.ts';
import { writePipelineModule } from '../helpers/pipelineOperations.ts';

/** `opstate control-plane --pipeline <module>`: a control-plane process runs a declared pipeline. */
const deploy = deploymentPerTest();
let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('opstate control-plane --pipeline', () => {
  it('runs the pipeline the module exports: packaging submitted, every later stage created once', async () => {
    const dep = await deploy();
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-cli-'));
    const site = `pcli-${Math.random().toString(16).slice(2, 8)}`;
    const module = await writePipelineModule(dir, site);
    const rt = dep.runtime;
    const sample = await registerSampleData(rt.artifacts, dir, { site, packageCount: 3 });
    const roots = new Map(Object.values(sample.locations).map((l) => [l.id, l.storageRoot]));
    dep.spawnCli(['control-plane', '--pipeline', module]);
    rt.startWorker({
      kinds: [...OPERATION_KINDS],
      handlers: createStageHandlers({
        storageRootOf: (id) => roots.get(id) as string,
      }),
    });
    await rt.submitMany(
      (SAMPLE_PIPELINE[0]?.inputs(sample, []) ?? []).map((p) => ({ ...p, by: 'test' })),
    );
    const counts = async () => {
      const rows = await rt.database.execute(sql`
        select kind, count(*)::int as n, count(*) filter (where status = 'COMPLETED')::int as done
        from operation group by kind`);
      return new Map(rows.map((r) => [String(r.kind), { n: Number(r.n), done: Number(r.done) }]));
    };
    await waitFor(
      async () => (await counts()).get(OperationKind.LONG_TERM_ARCHIVE)?.done === 3,
      '3 archives COMPLETED',
      120_000,
    );
    const final = await counts();
    expect(Object.fromEntries([...final].map(([k, v]) => [k, v.n]))).toEqual({
      [OperationKind.RAW_DATA_PACKAGE]: 3,
      [OperationKind.DATA_TRANSFER_PACKAGE]: 1,
      [OperationKind.TRANSFER]: 1,
      [OperationKind.UNPACK]: 1,
      [OperationKind.LONG_TERM_ARCHIVE]: 3,
    });
  }, 180_000);

  it('refuses a module whose pipeline has a cycle, naming it, and one that does not exist', async () => {
    const dep = await deploy();
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-cli-'));
    const module = join(dir, 'cycle.mjs');
    await writeFile(
      module,
      `export default {
  name: 'loop',
  locations: { a: { site: 's', name: 'a' } },
  stages: {
    packaging: { kind: 'raw_data_package', at: 'a' },
    unpack: { kind: 'unpack', after: 'unpack', at: 'a' },
  },
};
`,
    );
    const cyclic = dep.spawnCli(['control-plane', '--pipeline', module]);
    expect(await cyclic.exited).not.toBe(0);
    expect(cyclic.output.join('\n')).toMatch(
      /cycle\.mjs: .*stages 'unpack' → 'unpack' form a cycle/,
    );
    const missing = dep.spawnCli(['control-plane', '--pipeline', join(dir, 'none.mjs')]);
    expect(await missing.exited).not.toBe(0);
    expect(missing.output.join('\n')).toMatch(/none\.mjs does not exist/);
  }, 60_000);
});
