import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createArchiveCommand } from '../../cli/commands/archive.ts';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import type { ArchiveStore } from '../../stages/ArchiveStore.ts';
import { storeArchive } from '../../stages/archiveObject.ts';
import { archiveStandIn } from '../../stages/archiveStandIn.ts';
import { runArchiveProtocol } from '../../stages/longTermArchive.ts';
import { stagingHandler } from '../../stages/staging.ts';
import { standInSource } from '../../stages/standInSource.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { makeWorld, type World } from '../persistence/fixtures.ts';

/** A store under test: the store, the storage root that names it, and how to clean up after it. */
export interface StoreUnderTest {
  readonly store: ArchiveStore;
  /**
   * A storage root that `archiveStoreAt` (the registry) turns into a store over the same objects:
   * a folder for the local store, `<scheme>:<…>` for a registered one. The operator commands
   * (`opstate archive verify`, `restore`) find the store through it.
   */
  readonly storageRoot: string;
  /** Removes what the store holds (its folder, its bucket), once the suite is done. */
  cleanup(): Promise<void>;
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const bytesOf = (text: string, size: number) =>
  Buffer.from(Array.from({ length: size }, (_, i) => (text.charCodeAt(i % text.length) + i) % 256));

async function collect(body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

/** A body that yields half of `bytes`, then fails: a writer that dies mid-put. */
async function* dyingMidway(bytes: Buffer): AsyncGenerator<Uint8Array> {
  yield bytes.subarray(0, bytes.length / 2);
  throw new Error('the writer died mid-put');
}

function capture() {
  const lines: string[] = [];
  return {
    lines,
    io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) },
  };
}

/**
 * The archive store contract, one suite for every backend (drizzle style): call it in a test file
 * with a name and a factory that opens the store (fresh per suite) and says how to clean up. It
 * checks the store alone — put-if-absent (a second put is refused as existing, with the first
 * object's version, and the object is unchanged), exact read-back of multi-chunk binary bytes,
 * `stat`, independent keys, nothing for a key never written, a writer that dies mid-put leaving
 * the key free — and the archive protocol around it on the real Postgres: a foreign object at the
 * key is a CONFLICT (recorded, not retried, never overwritten), an archive completes with its
 * VERIFIED record, an attempt that dies after the put or during the read-back is resumed by the
 * next one on the same object (as the crash matrix's `after-store` and `during-read-back` points),
 * and `opstate archive verify` and `restore` reach the object through the registry.
 *
 * @example
 * ```ts
 * archiveStoreContract('sftp', async () => {
 *   const root = `sftp:${await freshFolder()}`;
 *   return { store: archiveStoreAt(root), storageRoot: root, cleanup: () => removeFolder() };
 * });
 * ```
 */
export function archiveStoreContract(name: string, open: () => Promise<StoreUnderTest>): void {
  describe(`the archive store contract: ${name}`, () => {
    let under: StoreUnderTest;
    let testDb: TestDatabase;
    let database: Database;
    let w: World;
    let archiveId: string;
    let restoreRoot: string;
    const store = () => under.store;

    beforeAll(async () => {
      under = await open();
      testDb = await createTestDatabase('opstate_store', { migrated: true });
      database = await openDatabase({ databaseUrl: testDb.url, max: 4 });
      await migrate(database);
      w = await makeWorld(database);
      const location = await w.artifacts.addLocation({
        site: w.archive.site,
        name: `store-${randomUUID().slice(0, 8)}`,
        locationType: LocationType.LONG_TERM_ARCHIVE,
        storageRoot: under.storageRoot,
      });
      archiveId = location.id;
      restoreRoot = await mkdtemp(join(tmpdir(), 'opstate-store-restore-'));
    });
    afterAll(async () => {
      await database?.close();
      await dropTestDatabase(testDb);
      await under?.cleanup();
      if (restoreRoot !== undefined) await rm(restoreRoot, { recursive: true, force: true });
    });

    /** A long-term archive operation of a new package into the store's location, IN_PROGRESS. */
    async function runningArchive(): Promise<{ id: string; pkg: string }> {
      const ops = new OperationStore(database);
      const pkg = await w.artifacts.addRawDataPackage({ name: `rdp-${randomUUID()}` });
      const id = await ops.create({
        kind: OperationKind.LONG_TERM_ARCHIVE,
        fields: {
          rawDataPackageId: pkg,
          sourceLocationId: w.source.id,
          destinationLocationId: archiveId,
        },
      });
      await ops.apply(id, { type: 'SCHEDULE' });
      await ops.apply(id, { type: 'START', attempt: 1, workerId: 'contract' });
      return { id, pkg };
    }

    /** The worker of the last attempt died: the monitor resets the operation and another starts. */
    async function nextAttempt(id: string, attempt: number): Promise<void> {
      const ops = new OperationStore(database);
      await ops.apply(id, { type: 'RESET', by: 'heartbeat_monitor', reason: 'the worker died' });
      await ops.apply(id, { type: 'SCHEDULE' });
      await ops.apply(id, { type: 'START', attempt, workerId: 'contract' });
    }

    /** A handler context of `attempt` whose steps are kept in `journal` (as the step journal keeps them). */
    function contextOf(id: string, attempt: number, journal: Map<string, unknown>): HandlerContext {
      return {
        operation: { id, kind: OperationKind.LONG_TERM_ARCHIVE, attempt, retryCount: attempt - 1 },
        step: async <T>(step: string, fn: () => Promise<T>): Promise<T> => {
          if (journal.has(step)) return journal.get(step) as T;
          const result = await fn();
          journal.set(step, result);
          return result;
        },
        signal: new AbortController().signal,
        inspect: () => inspectOperation(database, id),
        withDatabase: <T>(_what: string, run: (db: Database) => Promise<T>) => run(database),
      } as unknown as HandlerContext;
    }

    const statesOf = async (id: string) =>
      (await new ArchiveRecordRepository(database).list(id)).map((r) => r.state);

    it('puts a key only if absent: a second put is refused as existing, with the first version, and changes nothing', async () => {
      const key = `contract/${randomUUID()}/once.tar`;
      const first = bytesOf('first', 70_001);
      const put = await store().putIfAbsent(key, [first.subarray(0, 1000), first.subarray(1000)]);
      expect(put.created).toBe(true);
      expect(typeof put.version).toBe('string');
      const again = await store().putIfAbsent(key, [bytesOf('second', 512)]);
      expect(again).toEqual({ created: false, version: put.version });
      const read = await store().read(key);
      expect(read?.version).toBe(put.version);
      expect(sha(await collect(read?.body ?? []))).toBe(sha(first));
    });

    it('reads back exactly the bytes put, and stats their size, version and (where kept) sha256', async () => {
      const key = `contract/${randomUUID()}/exact.tar`;
      const bytes = Buffer.concat([Buffer.alloc(3, 0), bytesOf('\u0000\u00ff binary', 1_048_573)]);
      const put = await store().putIfAbsent(
        key,
        (async function* () {
          for (let at = 0; at < bytes.length; at += 65_536) yield bytes.subarray(at, at + 65_536);
        })(),
      );
      const back = await collect((await store().read(key))?.body ?? []);
      expect(back.equals(bytes)).toBe(true);
      const stat = await store().stat(key);
      expect(stat).toMatchObject({ size: bytes.length, version: put.version });
      if (stat?.sha256 !== undefined) expect(stat.sha256).toBe(sha(bytes));
    });

    it('has nothing at a key never written, and keeps keys apart', async () => {
      const base = `contract/${randomUUID()}`;
      expect(await store().read(`${base}/never.tar`)).toBeNull();
      expect(await store().stat(`${base}/never.tar`)).toBeNull();
      await store().putIfAbsent(`${base}/a.tar`, [Buffer.from('a')]);
      await store().putIfAbsent(`${base}/a/b.tar`, [Buffer.from('b')]);
      expect((await collect((await store().read(`${base}/a.tar`))?.body ?? [])).toString()).toBe(
        'a',
      );
      expect((await collect((await store().read(`${base}/a/b.tar`))?.body ?? [])).toString()).toBe(
        'b',
      );
    });

    it('a writer that dies mid-put leaves the key free; the next put creates the object whole', async () => {
      const key = `contract/${randomUUID()}/died.tar`;
      const bytes = bytesOf('whole', 10_000);
      await expect(store().putIfAbsent(key, dyingMidway(bytes))).rejects.toThrow('died mid-put');
      expect(await store().stat(key)).toBeNull();
      expect(await store().read(key)).toBeNull();
      expect((await store().putIfAbsent(key, [bytes])).created).toBe(true);
      expect((await collect((await store().read(key))?.body ?? [])).equals(bytes)).toBe(true);
    });

    it('a foreign object at the key is a CONFLICT in the archive stage: recorded, not retried, never overwritten', async () => {
      const { id, pkg } = await runningArchive();
      const key = `raw_data_package/${pkg}.tar`;
      const foreign = bytesOf('someone else', 4_096);
      const theirs = await store().putIfAbsent(key, [foreign]);
      const err = await archiveStandIn(contextOf(id, 1, new Map()), store()).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OpstateError);
      expect(err).toMatchObject({ code: OpstateErrorCode.CONFLICT, retryable: false });
      expect(await statesOf(id)).toEqual([ArchiveState.PLANNED, ArchiveState.CONFLICT]);
      const read = await store().read(key);
      expect(read?.version).toBe(theirs.version);
      expect((await collect(read?.body ?? [])).equals(foreign)).toBe(true);
      await expect(
        new OperationStore(database).complete(id, 1, [
          { artifactType: 'raw_data_package', artifactId: pkg, locationId: archiveId },
        ]),
      ).rejects.toMatchObject({ code: OpstateErrorCode.OUTPUT_CONTRACT });
    });

    it('an archive through the stage completes with its VERIFIED record; verify and restore reach it through the registry', async () => {
      const { id } = await runningArchive();
      const { outputs } = await archiveStandIn(contextOf(id, 1, new Map()), store());
      expect(await statesOf(id)).toEqual([
        ArchiveState.PLANNED,
        ArchiveState.UPLOADED,
        ArchiveState.READ_BACK,
        ArchiveState.VERIFIED,
      ]);
      expect(outputs[0]?.path).toBe(
        store().describe(`raw_data_package/${outputs[0]?.artifactId}.tar`),
      );
      const done = await new OperationStore(database).complete(id, 1, outputs);
      expect(done.copiesCreated).toBe(1);

      const command = createArchiveCommand(() =>
        Promise.resolve({ ...database, close: async () => {} }),
      );
      const verify = capture();
      expect(await command.run(['verify', id], verify.io), verify.lines.join('\n')).toBe(0);
      expect(verify.lines.join('\n')).toContain('1 members match the manifest');
      const to = join(restoreRoot, id);
      const restore = capture();
      expect(
        await command.run(['restore', id, '--to', to], restore.io),
        restore.lines.join('\n'),
      ).toBe(0);
      expect(await readFile(join(to, 'data.bin'), 'utf8')).toBe(
        `package ${outputs[0]?.artifactId}`,
      );
      expect((await readdir(to)).sort()).toEqual(['MANIFEST.json', 'data.bin']);
    });

    it.each([
      ['after the object is stored, before its step (after-store)', 'afterStore'],
      ['during the read-back, after READ_BACK (during-read-back)', 'duringReadBack'],
    ] as const)(
      'an attempt that dies %s is resumed by the next on the same object',
      async (_, point) => {
        const { id, pkg } = await runningArchive();
        const key = `raw_data_package/${pkg}.tar`;
        const source = await standInSource(pkg);
        // The steps an attempt finished stay done for the next one, as in the step journal.
        const journal = new Map<string, unknown>();
        const dies = new Error(`died at ${point}`);
        await expect(
          runArchiveProtocol(
            contextOf(id, 1, journal),
            { faults: { [point]: () => Promise.reject(dies) } },
            store(),
            key,
            source,
          ),
        ).rejects.toBe(dies);
        const firstVersion = (await store().stat(key))?.version;
        expect(firstVersion).toBeDefined();
        await nextAttempt(id, 2);
        const resumed = await runArchiveProtocol(
          contextOf(id, 2, journal),
          {},
          store(),
          key,
          source,
        );
        expect(resumed.uploaded.objectVersion).toBe(firstVersion);
        expect((await store().stat(key))?.version).toBe(firstVersion);
        const states = await statesOf(id);
        expect(states.at(-1)).toBe(ArchiveState.VERIFIED);
        expect(states.filter((s) => s === ArchiveState.UPLOADED)).toHaveLength(
          point === 'afterStore' ? 2 : 1,
        );
        await new OperationStore(database).complete(id, 2, [
          {
            artifactType: 'raw_data_package',
            artifactId: pkg,
            locationId: archiveId,
            checksum: `sha256:${resumed.plan.contentSha256}`,
          },
        ]);
      },
    );

    it('a staging reads the archive through the store its location names and extracts it', async () => {
      const { id, pkg } = await runningArchive();
      const { outputs } = await archiveStandIn(contextOf(id, 1, new Map()), store());
      const ops = new OperationStore(database);
      await ops.complete(id, 1, outputs);
      const [archived] = await database.execute<{ id: string; checksum: string }>(
        `select id, checksum from physical_copy where artifact_id = '${pkg}' and location_id = '${archiveId}'`,
      );
      const staging = await ops.create({
        kind: OperationKind.STAGING,
        fields: {
          rawDataPackageId: pkg,
          sourceLocationId: archiveId,
          destinationLocationId: w.processing.id,
        },
        inputs: [String(archived?.id)],
      });
      await ops.apply(staging, { type: 'SCHEDULE' });
      await ops.apply(staging, { type: 'START', attempt: 1, workerId: 'contract' });
      const processingRoot = join(restoreRoot, `processing-${staging}`);
      // No archiveStoreOf: the archive location's store is the one its storage root names.
      const roots = new Map([
        [archiveId, under.storageRoot],
        [w.processing.id, processingRoot],
      ]);
      const handler = stagingHandler({ storageRootOf: (loc) => roots.get(loc) as string });
      const result = await handler(contextOf(staging, 1, new Map()));
      const folder = join(processingRoot, pkg);
      expect(result?.outputs).toEqual([
        expect.objectContaining({
          locationId: w.processing.id,
          path: folder,
          checksum: archived?.checksum,
        }),
      ]);
      expect(await readdir(folder)).toEqual(['data.bin']);
      expect(await readFile(join(folder, 'data.bin'), 'utf8')).toBe(`package ${pkg}`);
      expect((await ops.complete(staging, 1, result?.outputs ?? [])).copiesCreated).toBe(1);
    });

    it('the protocol finds its own earlier object identical, and a store that loses a put is caught', async () => {
      const key = `contract/${randomUUID()}/again.tar`;
      const plain = bytesOf('package', 2_048);
      const first = await storeArchive(store(), key, plain, undefined);
      const second = await storeArchive(store(), key, plain, undefined);
      expect(first.outcome).toBe('created');
      expect(second).toMatchObject({ outcome: 'identical', objectVersion: first.objectVersion });
      await expect(
        storeArchive(store(), key, bytesOf('other', 2_048), undefined),
      ).rejects.toMatchObject({
        code: OpstateErrorCode.CONFLICT,
        retryable: false,
      });
    });
  });
}
