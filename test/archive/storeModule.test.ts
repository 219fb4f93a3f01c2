import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArchiveState } from '../../machines/ArchiveState.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArchiveRecordRepository } from '../../persistence/ArchiveRecordRepository.ts';
import { inspectOperation } from '../../persistence/inspectOperation.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { archiveStandIn } from '../../stages/archiveStandIn.ts';
import { LocalArchiveStore } from '../../stages/LocalArchiveStore.ts';
import type { HandlerContext } from '../../worker/OperationHandler.ts';
import { opstateArgs, REPO_ROOT } from '../helpers/opstateCli.ts';
import { createTestDatabase, dropTestDatabase, type TestDatabase } from '../helpers/postgres.ts';
import { makeWorld } from '../persistence/fixtures.ts';

/**
 * `opstate archive verify|restore` on an archive kept by a store that only a module registers
 * (`--store-module`, `OPSTATE_ARCHIVE_STORE_MODULES`): the real CLI process (the built package)
 * against the real Postgres, with a test-only store module that registers the scheme `testdir:`
 * (the local folder store under another name, which the CLI does not know by itself).
 */
const SCHEME = 'testdir';
let testDb: TestDatabase;
let database: Database;
let dir: string;
let operationId: string;
let storeModule: string;

interface CliRun {
  readonly code: number;
  readonly stdout: string;
  /** stdout and stderr. */
  readonly out: string;
}

function cli(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      opstateArgs(args),
      { cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: testDb.url, ...env } },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : Number((err as { code?: unknown }).code);
        resolve({ code, stdout, out: `${stdout}${stderr}` });
      },
    );
  });
}

const statesOf = async () =>
  (await new ArchiveRecordRepository(database).list(operationId)).map((r) => r.state);

beforeAll(async () => {
  testDb = await createTestDatabase('opstate_store_module', { migrated: true });
  database = await openDatabase({ databaseUrl: testDb.url, max: 2 });
  await migrate(database);
  dir = await mkdtemp(join(tmpdir(), 'opstate-store-module-'));
  const folder = join(dir, 'objects');
  const w = await makeWorld(database);
  const archive = await w.artifacts.addLocation({
    site: w.archive.site,
    name: 'testdir-archive',
    locationType: LocationType.LONG_TERM_ARCHIVE,
    storageRoot: `${SCHEME}:${folder}`,
  });
  const ops = new OperationStore(database);
  const pkg = await w.artifacts.addRawDataPackage({ name: `rdp-${randomUUID()}` });
  operationId = await ops.create({
    kind: OperationKind.LONG_TERM_ARCHIVE,
    fields: {
      rawDataPackageId: pkg,
      sourceLocationId: w.source.id,
      destinationLocationId: archive.id,
    },
  });
  await ops.apply(operationId, { type: 'SCHEDULE' });
  await ops.apply(operationId, { type: 'START', attempt: 1, workerId: 'test' });
  const ctx = {
    operation: {
      id: operationId,
      kind: OperationKind.LONG_TERM_ARCHIVE,
      attempt: 1,
      retryCount: 0,
    },
    step: <T>(_name: string, fn: () => Promise<T>) => fn(),
    signal: new AbortController().signal,
    inspect: () => inspectOperation(database, operationId),
    withDatabase: <T>(_what: string, run: (db: Database) => Promise<T>) => run(database),
  } as unknown as HandlerContext;
  const { outputs } = await archiveStandIn(ctx, new LocalArchiveStore(folder));
  await ops.complete(operationId, 1, outputs);

  const built = pathToFileURL(join(REPO_ROOT, 'dist', 'stages', 'LocalArchiveStore.js')).href;
  storeModule = join(dir, 'testdirStore.mjs');
  await writeFile(
    storeModule,
    `import { LocalArchiveStore } from '${built}';
export const archiveStores = {
  ${SCHEME}: (location) => new LocalArchiveStore(location.slice('${SCHEME}:'.length)),
};
`,
  );
});
afterAll(async () => {
  await database?.close();
  await dropTestDatabase(testDb);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('opstate archive with a store module', () => {
  it('without the module, a scheme nobody registered is a usage error naming --store-module, and nothing is recorded', async () => {
    const before = await statesOf();
    const run = await cli(['archive', 'verify', operationId]);
    expect(run.code, run.out).toBe(2);
    expect(run.out).toContain(`names archive store '${SCHEME}', which no module registered here`);
    expect(run.out).toContain('--store-module');
    expect(await statesOf()).toEqual(before);
  });

  it('verify --store-module reaches the archive through the store the module registers', async () => {
    const run = await cli([
      'archive',
      'verify',
      operationId,
      '--json',
      '--store-module',
      storeModule,
    ]);
    expect(run.code, run.out).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      ok: true,
      membersChecked: 1,
      location: expect.stringContaining(join(dir, 'objects')),
    });
    expect((await statesOf()).at(-1)).toBe(ArchiveState.VERIFIED);
  });

  it('restore finds the module in OPSTATE_ARCHIVE_STORE_MODULES', async () => {
    const to = join(dir, 'restored');
    const run = await cli(['archive', 'restore', operationId, '--to', to], {
      OPSTATE_ARCHIVE_STORE_MODULES: storeModule,
    });
    expect(run.code, run.out).toBe(0);
    expect(await readFile(join(to, 'data.bin'), 'utf8')).toMatch(/^package /);
  });

  it('a missing module, one that is not JavaScript, or one that exports no stores is a usage error naming it', async () => {
    const empty = join(dir, 'empty.mjs');
    await writeFile(empty, 'export const nothing = 1;\n');
    const typescript = join(dir, 'store.ts');
    await writeFile(typescript, 'export const archiveStores: object = {};\n');
    for (const [module, says] of [
      [join(dir, 'none.mjs'), 'does not exist'],
      [empty, "must export 'archiveStores'"],
      [typescript, 'is not JavaScript'],
    ] as const) {
      const run = await cli(['archive', 'verify', operationId, '--store-module', module]);
      expect(run.code, run.out).toBe(2);
      expect(run.out).toContain(module);
      expect(run.out).toContain(says);
    }
  });
});
