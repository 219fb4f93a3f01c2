import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CopyDeleterOptions } from '../../deleter/CopyDeleter.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { DataLocation, PhysicalCopyRecord } from '../../persistence/ArtifactRepository.ts';
import { ArtifactType } from '../../persistence/ArtifactType.ts';
import { DeletionPolicyRepository } from '../../persistence/DeletionPolicyRepository.ts';
import { createRuntime, type Runtime, type RuntimeTiming } from '../../runtime/Runtime.ts';
import type { ArchiveCipher } from '../../stages/archiveCipher.ts';
import { createStageHandlers } from '../../stages/createStageHandlers.ts';
import { checksumOf, MANIFEST_NAME, sha256, writePackage } from '../../stages/packageFormat.ts';
import type { ArchiveFaults } from '../../stages/StageEnvironment.ts';
import { unpackTar } from '../../stages/tar.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { uniquePrefix } from '../transport/helpers.ts';

export const NATS_URL = process.env.OPSTATE_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

/** Small timers for archive tests (conditions are waited on, never these). */
export const ARCHIVE_TIMING: Partial<RuntimeTiming> = {
  heartbeatIntervalMs: 250,
  heartbeatTimeoutMs: 4_000,
  reconcilerFloorMs: 8_000,
  ackWaitMs: 12_000,
  monitorIntervalMs: 250,
  reconcilerIntervalMs: 500,
  schedulerIntervalMs: 50,
  relayIntervalMs: 50,
  leaderPollMs: 250,
  // Tests fail archives on purpose, one after the other; the breaker must not park the rest.
  breakerThreshold: 1_000,
};

/** A package as a test writes it: its id, its buffer folder copy and its files. */
export interface TestPackage {
  readonly id: string;
  readonly name: string;
  readonly copy: PhysicalCopyRecord;
  readonly folder: string;
  readonly files: Readonly<Record<string, Buffer>>;
}

/** A deployment on the real Postgres and NATS, with a temp folder per location. */
export interface ArchiveWorld {
  readonly runtime: Runtime;
  readonly db: TestDatabase;
  /** The NATS prefix of this deployment (OPSTATE_PREFIX for a CLI run against it). */
  readonly prefix: string;
  readonly dir: string;
  readonly buffer: DataLocation;
  readonly archive: DataLocation;
  readonly logger: ReturnType<typeof memoryLogger>;
  readonly policies: DeletionPolicyRepository;
  /**
   * Writes a package folder (MANIFEST.json + files) at the buffer and registers its copy; `place`
   * writes it into another folder and registers the copy under another path (a hostile one).
   */
  addPackage(
    files?: Record<string, Buffer>,
    name?: string,
    place?: (id: string) => Promise<{ folder: string; path: string }>,
  ): Promise<TestPackage>;
  /** Starts a worker for long-term archive with the reference handler. */
  startArchiver(env?: { cipher?: ArchiveCipher; faults?: ArchiveFaults }): void;
  /** Submits a long-term archive of a package and returns the operation id. */
  submitArchive(pkg: TestPackage, archiveKey?: string): Promise<string>;
  /** Waits for an operation to reach a status. */
  waitStatus(id: string, status: string, timeoutMs?: number): Promise<void>;
  startDeleter(
    options?: Partial<Omit<CopyDeleterOptions, 'database' | 'clock' | 'logger'>>,
  ): ReturnType<Runtime['startCopyDeleter']>;
  close(): Promise<void>;
}

let counter = 0;

export async function startArchiveWorld(): Promise<ArchiveWorld> {
  const db = await createTestDatabase('opstate_archive');
  const logger = memoryLogger();
  const prefix = uniquePrefix('arc').replaceAll('.', '_');
  const runtime = await createRuntime({
    databaseUrl: db.url,
    natsUrl: NATS_URL,
    prefix,
    timing: ARCHIVE_TIMING,
    logger,
  });
  const dir = await mkdtemp(join(tmpdir(), 'opstate-archive-'));
  const site = `site-${Math.random().toString(16).slice(2, 8)}`;
  const location = async (name: string, locationType: LocationType) => {
    const storageRoot = join(dir, name);
    await mkdir(storageRoot, { recursive: true });
    return runtime.artifacts.addLocation({ site, name, locationType, storageRoot });
  };
  const buffer = await location('buffer', LocationType.BUFFER);
  const archive = await location('archive', LocationType.LONG_TERM_ARCHIVE);
  const roots = new Map([
    [buffer.id, buffer.storageRoot],
    [archive.id, archive.storageRoot],
  ]);
  runtime.startControlPlane();
  const policies = new DeletionPolicyRepository(runtime.database);
  await policies.set({ graceSeconds: 0 }, 'test');
  const world: ArchiveWorld = {
    runtime,
    db,
    prefix,
    dir,
    buffer,
    archive,
    logger,
    policies,
    async addPackage(files, name, place) {
      const chosen = files ?? {
        'scan_0001.fits': Buffer.from(`first scan ${++counter}\n`),
        'scan_0002.fits': Buffer.from(`second scan ${counter}\n`.repeat(40)),
        'scan_0003.fits': Buffer.from(`third scan ${counter}\n`.repeat(7)),
      };
      const pkgName = name ?? `obs-${Date.now().toString(36)}-${++counter}`;
      const id = await runtime.artifacts.addRawDataPackage({ name: pkgName });
      const bytes = writePackage(Object.entries(chosen).map(([n, data]) => ({ name: n, data })));
      const placed = await place?.(id);
      const folder = placed?.folder ?? join(buffer.storageRoot, 'raw_data_package', id);
      await mkdir(folder, { recursive: true });
      const [head] = unpackTar(bytes);
      await writeFile(join(folder, MANIFEST_NAME), head?.data ?? Buffer.alloc(0));
      for (const [n, data] of Object.entries(chosen)) await writeFile(join(folder, n), data);
      const { copy } = await runtime.artifacts.addCopy({
        artifactType: ArtifactType.RAW_DATA_PACKAGE,
        artifactId: id,
        locationId: buffer.id,
        path: placed?.path ?? folder,
        checksum: checksumOf(sha256(bytes)),
        size: bytes.length,
      });
      return { id, name: pkgName, copy, folder, files: chosen };
    },
    startArchiver(env = {}) {
      const handlers = createStageHandlers({
        storageRootOf: (id) => roots.get(id) as string,
        ...env,
      });
      runtime.startWorker({
        kinds: [OperationKind.LONG_TERM_ARCHIVE],
        handlers: { [OperationKind.LONG_TERM_ARCHIVE]: handlers[OperationKind.LONG_TERM_ARCHIVE] },
      });
    },
    submitArchive(pkg, archiveKey) {
      return runtime.submit({
        kind: OperationKind.LONG_TERM_ARCHIVE,
        fields: {
          rawDataPackageId: pkg.id,
          sourceLocationId: buffer.id,
          destinationLocationId: archive.id,
          archiveKey: archiveKey ?? `${pkg.name}.tar`,
        },
        inputs: [pkg.copy.id],
      });
    },
    async waitStatus(id, status, timeoutMs = 30_000) {
      await waitFor(
        async () => (await runtime.store.load(id)).status === status,
        `operation ${id} to be ${status} (log: ${JSON.stringify(logger.lines.slice(-5))})`,
        timeoutMs,
      );
    },
    startDeleter(options = {}) {
      return runtime.startCopyDeleter({ intervalMs: 100, leaseMs: 2_000, ...options });
    },
    async close() {
      await (runtime.transport as JetStreamTransport).destroy?.().catch(() => undefined);
      await runtime.close();
      await dropTestDatabase(db);
      await rm(dir, { recursive: true, force: true });
    },
  };
  return world;
}
