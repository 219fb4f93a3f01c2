import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  classifyPackageStep,
  type PackageClassification,
} from '../../machines/classifyPackageStep.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { PACKAGE_STATES, type PackageState } from '../../machines/packageState.ts';
import { defaultPipeline } from '../../machines/pipeline.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { FlowLimitRepository } from '../../persistence/FlowLimitRepository.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { listPackagesInState } from '../../persistence/reads/listPackagesInState.ts';
import { selectPackage } from '../../persistence/reads/selectPackage.ts';
import { createRuntime, type Runtime } from '../../runtime/Runtime.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import { SAMPLE_PIPELINE } from '../../stages/samplePipeline.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { ARCHIVE_TIMING, NATS_URL } from '../archive/world.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { uniquePrefix } from '../transport/helpers.ts';

/**
 * The derived package state observed while the default pipeline runs on the real Postgres and
 * NATS: each location is parked by a flow limit of 0 in turn, so every package stops at a known
 * step, says why it waits there, and moves on when the limit is lifted, up to ARCHIVED.
 */
let db: TestDatabase | undefined;
let runtime: Runtime | undefined;
let dir: string | undefined;

afterEach(async () => {
  if (runtime !== undefined) {
    await (runtime.transport as JetStreamTransport).destroy?.().catch(() => undefined);
    await runtime.close();
  }
  await dropTestDatabase(db);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  runtime = undefined;
  db = undefined;
  dir = undefined;
});

describe('package state while the pipeline runs', () => {
  it('advances every package through its stages, each stop saying why it waits', async () => {
    db = await createTestDatabase('opstate_pkgstate');
    dir = await mkdtemp(join(tmpdir(), 'opstate-pkgstate-'));
    const site = `pkg-${Math.random().toString(16).slice(2, 8)}`;
    const pipeline = defaultPipeline({
      source: { site, name: 'source' },
      destinations: [{ buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } }],
    });
    const rt = await createRuntime({
      databaseUrl: db.url,
      natsUrl: NATS_URL,
      prefix: uniquePrefix('pkgstate').replaceAll('.', '_'),
      timing: ARCHIVE_TIMING,
      logger: memoryLogger(),
      pipeline,
    });
    runtime = rt;
    const sample = await registerSampleData(rt.artifacts, dir, { site, packageCount: 3 });
    const loc = sample.locations;
    const packages = sample.packages.map((p) => p.id);
    const bundle = sample.dataTransferPackage.id;
    const limits = new FlowLimitRepository(rt.database);
    const step = async (id: string): Promise<PackageClassification> => {
      const record = await selectPackage(rt.database, id);
      if (record === undefined) throw new Error(`no package ${id}`);
      return classifyPackageStep(record.facts, Date.now());
    };
    // Every state each package is seen in, in order, by a poller running beside the run.
    const seen = new Map<string, PackageState[]>([...packages, bundle].map((id) => [id, []]));
    const look = async () => {
      for (const [id, states] of seen) {
        const { state } = await step(id);
        if (states.at(-1) !== state) states.push(state);
      }
    };
    const until = async (want: Partial<PackageClassification>, what: string) => {
      for (const id of [...packages, bundle]) {
        await waitFor(
          async () => {
            await look();
            const s = await step(id);
            return Object.entries(want).every(
              ([k, v]) => s[k as keyof PackageClassification] === v,
            );
          },
          `${id === bundle ? 'the bundle' : 'each package'} ${what}`,
          120_000,
        );
      }
    };

    // Registered, nothing run: the packages are PLANNED, the bundle waits for its members.
    expect(await step(packages[0] as string)).toMatchObject({
      state: 'PLANNED',
      wait: 'not_started',
    });
    expect(await step(bundle)).toMatchObject({ state: 'PLANNED', wait: 'members' });

    await look();

    // Every location parked; packaging submitted: held at the source by its limit.
    for (const l of [loc.source, loc.buffer, loc.archive])
      await limits.set({ location: l.id, max: 0 });
    rt.startControlPlane();
    rt.startWorker({
      kinds: [...OPERATION_KINDS],
      handlers: createStageHandlers({
        storageRootOf: (id) =>
          (Object.values(loc).find((l) => l.id === id) as { storageRoot: string }).storageRoot,
      }),
    });
    const packaging = SAMPLE_PIPELINE[0]?.inputs(sample, []) ?? [];
    await rt.submitMany(packaging.map((p) => ({ ...p, by: 'test' })));
    await until(
      { state: 'PACKAGING', wait: 'flow_limit', kind: OperationKind.RAW_DATA_PACKAGE },
      'held at the source',
    );
    expect((await countPackageStates(rt.database)).raw_data_package.PACKAGING).toBe(3);
    expect(
      (await listPackagesInState(rt.database, 'PACKAGING', { limit: 10 })).rows
        .map((r) => r.id)
        .sort(),
    ).toEqual([...packages, bundle].sort());

    // The source runs: packaging, then bundling there; the transfer is held at the buffer.
    await limits.clear({ location: loc.source.id });
    await until(
      {
        state: 'TRANSFERRING',
        wait: 'flow_limit',
        kind: OperationKind.TRANSFER,
        location: `${site}/buffer`,
      },
      'held at the buffer by its limit',
    );

    // The buffer runs: transfer and unpack; each package's archive is held at the archive.
    await limits.clear({ location: loc.buffer.id });
    await until(
      { state: 'ARCHIVING', wait: 'flow_limit', kind: OperationKind.LONG_TERM_ARCHIVE },
      'held at the archive',
    );

    // The archive runs: everything is archived.
    await limits.clear({ location: loc.archive.id });
    await until({ state: 'ARCHIVED', wait: 'done' }, 'archived');
    const counts = await countPackageStates(rt.database);
    expect(counts.raw_data_package.ARCHIVED).toBe(3);
    expect(counts.data_transfer_package.ARCHIVED).toBe(1);
    expect(
      Object.values(counts).flatMap((c) =>
        Object.entries(c).filter(([s, n]) => s !== 'ARCHIVED' && n > 0),
      ),
    ).toEqual([]);

    // Each was seen moving forward only, through the stops the limits made.
    const order = (s: PackageState) => PACKAGE_STATES.indexOf(s);
    for (const [id, states] of seen) {
      const sorted = [...states].sort((a, b) => order(a) - order(b));
      expect(states, id).toEqual(sorted);
      expect(states, id).toEqual(
        expect.arrayContaining(['PLANNED', 'PACKAGING', 'TRANSFERRING', 'ARCHIVING', 'ARCHIVED']),
      );
    }
  }, 300_000);
});
