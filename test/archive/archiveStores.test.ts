import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocalArchiveStore } from '../../stages/LocalArchiveStore.ts';
import { archiveStoreAt, registerArchiveStore } from '../../stages/registerArchiveStore.ts';
import { memoryArchiveStore } from './memoryArchiveStore.ts';
import { archiveStoreContract } from './storeContract.ts';

/**
 * The archive store contract, run for every store this repository has: the local folder store
 * (the default for a storage root that is a path) and, as the probe of what a new store costs, a
 * test-only store in memory — its own file plus the one registration line below.
 */
const unregister = registerArchiveStore('mem', memoryArchiveStore);
afterAll(() => unregister());

archiveStoreContract('local folder', async () => {
  const root = await mkdtemp(join(tmpdir(), 'opstate-store-local-'));
  return {
    store: archiveStoreAt(root),
    storageRoot: root,
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
});

archiveStoreContract('in memory (test only)', async () => {
  const root = `mem:contract-${randomUUID()}`;
  return { store: archiveStoreAt(root), storageRoot: root, cleanup: async () => {} };
});

describe('choosing a store by storage root', () => {
  it('a path and file: URLs are the local folder store; a registered scheme its store', () => {
    expect(archiveStoreAt('/lta')).toBeInstanceOf(LocalArchiveStore);
    expect(archiveStoreAt('file:///lta').describe('k/o.tar')).toBe('/lta/k/o.tar');
    expect(archiveStoreAt('file:/lta').describe('k/o.tar')).toBe('/lta/k/o.tar');
    expect(archiveStoreAt('mem:b1').describe('k/o.tar')).toBe('mem:b1/k/o.tar');
  });

  it('an unregistered scheme, a bad scheme, file, or a scheme taken by another store is CONFIG', () => {
    expect(() => archiveStoreAt('s3:bucket/prefix')).toThrow(
      expect.objectContaining({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringContaining("registerArchiveStore('s3'"),
      }),
    );
    for (const scheme of ['S3', 'x', '1ab', 'file', 'a b']) {
      expect(() => registerArchiveStore(scheme, memoryArchiveStore), scheme).toThrow(
        expect.objectContaining({ code: OpstateErrorCode.CONFIG }),
      );
    }
    expect(() => registerArchiveStore('mem', () => archiveStoreAt('/x'))).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.CONFIG }),
    );
    expect(archiveStoreAt('mem:b1').describe('k')).toBe('mem:b1/k');
  });
});
