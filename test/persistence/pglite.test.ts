import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { OperationStore } from '../../persistence/OperationStore.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { artifactSuite } from './artifactSuite.ts';
import { contractSuite } from './contractSuite.ts';
import { copySuite } from './copySuite.ts';
import { migrateIntoPublic } from './fixtures/legacyLayout.ts';
import { inputFor, MIGRATIONS, makeWorld } from './fixtures.ts';
import { storeSuite } from './storeSuite.ts';

describe('persistence on embedded PGlite (in memory)', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://' });
    expect(database.dialect).toBe('pglite');
    expect(await migrate(database)).toEqual({ applied: MIGRATIONS, total: MIGRATIONS });
  });

  afterAll(async () => {
    await database?.close();
  });

  // PGlite has one connection: the "peer" is the same database, and concurrent calls queue.
  storeSuite({ database: () => database, peer: async () => database });
  copySuite({ database: () => database, peer: async () => database });
  contractSuite({ database: () => database, peer: async () => database });
  artifactSuite({ database: () => database, peer: async () => database });

  it('a PGlite data folder keeps its data and schema across a reopen', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-pglite-'));
    try {
      const first = await openDatabase({ dataDir: dir, engine: 'pglite' });
      expect(await migrate(first)).toEqual({ applied: MIGRATIONS, total: MIGRATIONS });
      await new ArtifactRepository(first).addLocation({
        site: 'disk',
        name: 'buffer',
        locationType: LocationType.BUFFER,
        storageRoot: '/b',
      });
      await first.close();
      const again = await openDatabase({ dataDir: dir, engine: 'pglite' });
      try {
        expect(await migrate(again)).toEqual({ applied: 0, total: MIGRATIONS });
        expect(await new ArtifactRepository(again).findLocation('disk', 'buffer')).toBeDefined();
      } finally {
        await again.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  // Last: it points the one connection at public for a while.
  it('moves a PGlite database migrated before the schema into its schema', async () => {
    const upgraded: Database = { ...database, schema: 'pglite_upgrade' };
    try {
      // The old layout, built on the same connection pointed at public as it then was.
      await database.execute('set search_path to public');
      expect(await migrateIntoPublic(database)).toBe(MIGRATIONS);
      const id = await new OperationStore(database).create(
        inputFor(OperationKind.TRANSFER, await makeWorld(database)),
      );
      await database.execute('set search_path to pglite_upgrade');
      expect(await migrate(upgraded)).toEqual({
        applied: 0,
        total: MIGRATIONS,
        moved: { to: 'pglite_upgrade', tables: 51, functions: 31, migrations: MIGRATIONS },
      });
      expect((await new OperationStore(upgraded).load(id)).status).toBe('PENDING');
      const [left] = await database.execute<{ n: number }>(
        `select count(*)::int as n from pg_class
          where relnamespace = 'public'::regnamespace and relkind = 'r'`,
      );
      expect(left?.n).toBe(0);
      expect(await migrate(upgraded)).toEqual({ applied: 0, total: MIGRATIONS });
    } finally {
      await database.execute(`set search_path to ${database.schema}`);
    }
  });
});
