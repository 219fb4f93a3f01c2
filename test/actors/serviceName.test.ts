import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceName } from '../../runtime/serviceName.ts';

describe('resolveServiceName', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'opstate-service-name-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const inDir = async (packageJson: string | undefined) => {
    const here = await mkdtemp(join(dir, 'p-'));
    if (packageJson !== undefined) await writeFile(join(here, 'package.json'), packageJson);
    return resolveServiceName(undefined, here);
  };

  it('prefers the configured name', async () => {
    expect(await resolveServiceName('ingest', dir)).toBe('ingest');
  });

  it.each([
    ['the package name', '{"name":"@acme/ingest"}', '@acme/ingest'],
    ['service for a package name a submitter may not be', '{"name":"a~b"}', 'service'],
    ['service for a package without a name', '{"version":"1.0.0"}', 'service'],
    ['service for a package.json that is no JSON', '{name', 'service'],
    ['service with no package.json', undefined, 'service'],
  ])('falls back to %s', async (_, packageJson, expected) => {
    expect(await inDir(packageJson)).toBe(expected);
  });
});
