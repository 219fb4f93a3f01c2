import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import { deploymentPerTest, waitFor } from '../actors/harness.ts';
import { handlersModule } from '../helpers/opstateCli.ts';

/** The handlers module docker-compose.yml's workers load, run by a worker process. */
const MODULE = handlersModule(new URL('../../stages/handlers.ts', import.meta.url));

const deploy = deploymentPerTest();
let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('stages/handlers (the reference handlers as a worker module, as built)', () => {
  it('packages a raw data package at its location, and the worker stops cleanly', async () => {
    const dep = await deploy();
    dir = await mkdtemp(join(tmpdir(), 'opstate-stage-module-'));
    const sample = await registerSampleData(dep.runtime.artifacts, dir, {
      packageCount: 1,
      filesPerPackage: 2,
    });
    const pkg = sample.packages[0];
    if (pkg === undefined) throw new Error('no sample package');
    dep.runtime.startControlPlane();
    const worker = dep.spawnCli(['worker', '--kinds', 'raw_data_package', '--handlers', MODULE]);
    await waitFor(() => worker.printed('started for'), 'the worker to start', 60_000);
    const id = await dep.runtime.submit({
      kind: OperationKind.RAW_DATA_PACKAGE,
      fields: { rawDataPackageId: pkg.id, locationId: sample.locations.source.id },
      inputs: [...pkg.fileCopyIds],
    });
    await waitFor(
      async () => (await dep.runtime.store.load(id)).status === 'COMPLETED',
      'the packaging operation to complete',
      30_000,
    );
    const view = await dep.runtime.get(id);
    expect(view.outputs).toHaveLength(1);
    const output = view.outputs[0];
    expect(output?.locationId).toBe(sample.locations.source.id);
    await access(String(output?.path));
    expect(String(output?.path).startsWith(sample.locations.source.storageRoot)).toBe(true);

    worker.proc.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});
