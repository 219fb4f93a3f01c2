import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocationType } from '../../machines/routing.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { migrate } from '../../persistence/migrate.ts';
import { type Database, openDatabase } from '../../persistence/openDatabase.ts';
import { storeSuite } from './storeSuite.ts';

describe('persistence on embedded PGlite (in memory)', () => {
  let database: Database;

  beforeAll(async () => {
    database = await openDatabase({ dataDir: 'memory://' });
    expect(database.dialect).toBe('pglite');
    expect(await migrate(database)).toEqual({ applied: 3, total: 3 });
  });

  afterAll(async () => {
    await database?.close();
  });

  // PGlite has one connection: the "peer" is the same database, and concurrent calls queue.
  storeSuite({ database: () => database, peer: async () => database });

  it('a PGlite data folder keeps its data and schema across a reopen', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-pglite-'));
    try {
      const first = await openDatabase({ dataDir: dir, engine: 'pglite' });
      expect(await migrate(first)).toEqual({ applied: 3, total: 3 });
      await new ArtifactRepository(first).addLocation({
        site: 'disk',
        name: 'buffer',
        locationType: LocationType.BUFFER,
        storageRoot: '/b',
      });
      await first.close();
      const again = await openDatabase({ dataDir: dir, engine: 'pglite' });
      try {
        expect(await migrate(again)).toEqual({ applied: 0, total: 3 });
        expect(await new ArtifactRepository(again).findLocation('disk', 'buffer')).toBeDefined();
      } finally {
        await again.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
