import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocationType } from '../../machines/routing.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { contractSuite } from './contractSuite.ts';
import { copySuite } from './copySuite.ts';
import { MIGRATIONS } from './fixtures.ts';
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
});
