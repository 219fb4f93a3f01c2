import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData, type SampleData } from '../../stages/sampleData.ts';
import { deploymentPerTest, waitFor } from '../actors/harness.ts';
import { NATS_URL } from '../archive/world.ts';
import { handlersModule, REPO_ROOT } from '../helpers/opstateCli.ts';
import { operationKeys } from '../helpers/pipelineOperations.ts';

/**
 * The leader killed (SIGKILL) between each completion and the creation it leads to: a
 * control-plane process that dies before its pipeline pass writes each operation it creates,
 * restarted each time, creates every operation exactly once, each package's packaging (from its
 * files declared complete) included. Two transfer packages (of two
 * packages and of one), so each stage is created for a second subject while the first subject's
 * operation of it exists, and one unpack's completion fans out to two archives, each created
 * after a crash of its own.
 */
const deploy = deploymentPerTest();
/** Compiled against the built package: a restart starts no TypeScript loader. */
const FIXTURE = handlersModule(new URL('./fixtures/crashingPlane.ts', import.meta.url));

let dir: string | undefined;
let plane: ChildProcess | undefined;
afterEach(async () => {
  if (plane !== undefined && plane.exitCode === null && plane.signalCode === null) {
    const exited = new Promise((resolve) => plane?.once('exit', resolve));
    plane.kill('SIGKILL');
    await exited;
  }
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
  plane = undefined;
});

describe('the pipeline pass under a leader killed before each creation', () => {
  it('creates each operation exactly once through a SIGKILL and a restart before each', async () => {
    const dep = await deploy();
    dir = await mkdtemp(join(tmpdir(), 'opstate-pipeline-crash-'));
    const markers = join(dir, 'markers');
    await mkdir(markers);
    const site = `pcrash-${Math.random().toString(16).slice(2, 8)}`;
    const rt = dep.runtime;
    const storage = join(dir, 'storage');
    const first = await registerSampleData(rt.artifacts, storage, {
      site,
      packageCount: 2,
      namePrefix: 'a-',
    });
    const second = await registerSampleData(rt.artifacts, storage, {
      site,
      packageCount: 1,
      namePrefix: 'b-',
      locations: first.locations,
    });
    const worlds: SampleData[] = [first, second];
    const roots = new Map(Object.values(first.locations).map((l) => [l.id, l.storageRoot]));
    rt.startWorker({
      kinds: [...OPERATION_KINDS],
      handlers: createStageHandlers({
        storageRootOf: (id) => roots.get(id) as string,
      }),
    });
    // One crash before each operation, the packagings included (each package's files are
    // declared complete, nothing is submitted): its stage and subject name the marker.
    const expected = worlds
      .flatMap((w) => [
        ...w.packages.map((p) => `packaging-${p.id}`),
        ...['bundling', 'transfer-1', 'unpack-1'].map((s) => `${s}-${w.dataTransferPackage.id}`),
        ...w.packages.map((p) => `archive-1-${p.id}`),
      ])
      .sort();
    let starts = 0;
    let killed = 0;
    const output: string[] = [];
    const start = () => {
      starts++;
      const child = spawn(process.execPath, [FIXTURE], {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          DATABASE_URL: dep.db.url,
          NATS_URL,
          OPSTATE_PREFIX: dep.prefix,
          OPSTATE_TIMING: JSON.stringify(dep.timing),
          PIPELINE_SITE: site,
          FIXTURE_MARKERS: markers,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout?.on('data', (c: Buffer) => output.push(c.toString()));
      child.stderr?.on('data', (c: Buffer) => output.push(c.toString()));
      // A plane killed by its fault comes back at once, as a supervisor would bring it back.
      child.once('exit', (_code, signal) => {
        if (signal === 'SIGKILL' && plane === child) {
          killed++;
          plane = start();
        }
      });
      return child;
    };
    plane = start();
    for (const w of worlds) {
      for (const p of w.packages) {
        await rt.artifacts.declareFilesComplete({
          rawDataPackageId: p.id,
          locationId: w.locations.source.id,
        });
      }
    }
    await waitFor(
      async () =>
        (await operationKeys(rt.database)).filter(
          (o) => o.kind === OperationKind.LONG_TERM_ARCHIVE && o.status === 'COMPLETED',
        ).length === 3,
      `3 archives COMPLETED (plane printed: ${output.join('').slice(-2000)})`,
      240_000,
    );
    // Each operation's crash point fired, each killed the plane, and each restart went on.
    expect((await readdir(markers)).sort()).toEqual(expected);
    expect(killed).toBe(expected.length);
    expect(starts).toBe(expected.length + 1);
    const ops = await operationKeys(rt.database);
    expect(new Set(ops.map((o) => o.key)).size).toBe(ops.length);
    expect(ops.every((o) => o.status === 'COMPLETED')).toBe(true);
    const perKind = (kind: string) => ops.filter((o) => o.kind === kind).length;
    expect(perKind(OperationKind.RAW_DATA_PACKAGE)).toBe(3);
    expect(perKind(OperationKind.DATA_TRANSFER_PACKAGE)).toBe(2);
    expect(perKind(OperationKind.TRANSFER)).toBe(2);
    expect(perKind(OperationKind.UNPACK)).toBe(2);
    expect(perKind(OperationKind.LONG_TERM_ARCHIVE)).toBe(3);
    // Each package's fact is consumed by its one packaging.
    const consumed = await rt.database.execute(`select e.packaging_operation_id::text as op
      from package_files_complete e join packaging_operation p
        on p.operation_id = e.packaging_operation_id
        and p.raw_data_package_id = e.raw_data_package_id`);
    expect(consumed.map((r) => String(r.op)).sort()).toEqual(
      ops
        .filter((o) => o.kind === OperationKind.RAW_DATA_PACKAGE)
        .map((o) => o.id)
        .sort(),
    );
  }, 300_000);
});
