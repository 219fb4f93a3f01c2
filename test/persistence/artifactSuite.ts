import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { LocationType } from '../../machines/routing.ts';
import { ArtifactRepository } from '../../persistence/ArtifactRepository.ts';
import { registerSampleData } from '../../stages/sampleData.ts';
import type { SuiteBackend } from './storeSuite.ts';

async function refusal(promise: Promise<unknown>): Promise<OpstateError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpstateError);
  return err as OpstateError;
}

/**
 * Setup code that runs again: registering what is already there names it in one sentence, and
 * the get-or-create calls return it (or say which attribute differs), even when callers race.
 */
export function artifactSuite(backend: SuiteBackend): void {
  const artifacts = () => new ArtifactRepository(backend.database());
  const count = async (table: string, where: string) => {
    const [row] = await backend
      .database()
      .execute(`select count(*)::int as n from ${table} where ${where}`);
    return Number(row?.n);
  };

  it('refuses a second addLocation in one sentence naming the location there, the driver error kept as cause', async () => {
    const site = `s-${randomUUID()}`;
    const lta = {
      site,
      name: 'lta',
      locationType: LocationType.LONG_TERM_ARCHIVE,
      storageRoot: 's3://lta',
    };
    const first = await artifacts().addLocation(lta);
    const err = await refusal(artifacts().addLocation({ ...lta, storageRoot: 's3://other' }));
    expect(err.code).toBe(OpstateErrorCode.CONFLICT);
    expect(err.message).toBe(
      `location ${site}/lta already exists (id ${first.id}, locationType long_term_archive, storageRoot s3://lta); reuse that id (findOrAddLocation returns it) or choose another name`,
    );
    expect((err.cause as { code?: string }).code).toBe('23505');
    expect(err.details).toMatchObject({ id: first.id });
    expect(await count('data_location', `site = '${site}'`)).toBe(1);
  });

  it('refuses a second package of one name, naming it', async () => {
    const name = `obs-${randomUUID()}`;
    const dtp = await artifacts().addDataTransferPackage({ name: `dtp-${name}` });
    const pkg = await artifacts().addRawDataPackage({ name, dataTransferPackageId: dtp });
    expect((await refusal(artifacts().addRawDataPackage({ name }))).message).toBe(
      `raw data package ${name} already exists (id ${pkg}, dataTransferPackageId ${dtp}); reuse that id (findOrAddRawDataPackage returns it) or choose another name`,
    );
    expect(
      (await refusal(artifacts().addDataTransferPackage({ name: `dtp-${name}` }))).message,
    ).toBe(
      `data transfer package dtp-${name} already exists (id ${dtp}); reuse that id (findOrAddDataTransferPackage returns it) or choose another name`,
    );
  });

  it('findOrAddLocation returns the location there when it matches, and names what differs', async () => {
    const site = `s-${randomUUID()}`;
    const buffer = {
      site,
      name: 'buffer',
      locationType: LocationType.BUFFER,
      storageRoot: '/data',
    };
    const created = await artifacts().findOrAddLocation(buffer);
    expect(created).toMatchObject(buffer);
    expect(await artifacts().findOrAddLocation(buffer)).toEqual(created);
    const err = await refusal(
      artifacts().findOrAddLocation({
        ...buffer,
        locationType: LocationType.SOURCE,
        storageRoot: '/raw',
      }),
    );
    expect(err.code).toBe(OpstateErrorCode.CONFLICT);
    expect(err.message).toBe(
      `location ${site}/buffer already exists (id ${created.id}) with other attributes: its locationType is 'buffer', not 'source'; its storageRoot is '/data', not '/raw'; give the attributes it has to reuse it, or choose another name`,
    );
    expect(err.details).toMatchObject({
      id: created.id,
      differing: ['locationType', 'storageRoot'],
    });
    expect(await artifacts().findLocation(site, 'buffer')).toEqual(created);
  });

  it('findOrAdd of packages compares only what is given', async () => {
    const name = `obs-${randomUUID()}`;
    const dtp = await artifacts().findOrAddDataTransferPackage({ name: `dtp-${name}`, size: 10 });
    expect(await artifacts().findOrAddDataTransferPackage({ name: `dtp-${name}` })).toBe(dtp);
    expect(await artifacts().findOrAddDataTransferPackage({ name: `dtp-${name}`, size: 10 })).toBe(
      dtp,
    );
    expect(
      (await refusal(artifacts().findOrAddDataTransferPackage({ name: `dtp-${name}`, size: 11 })))
        .message,
    ).toBe(
      `data transfer package dtp-${name} already exists (id ${dtp}) with other attributes: its size is 10, not 11; give the attributes it has to reuse it, or choose another name`,
    );
    const pkg = await artifacts().findOrAddRawDataPackage({ name, dataTransferPackageId: dtp });
    expect(await artifacts().findOrAddRawDataPackage({ name })).toBe(pkg);
    expect(await artifacts().findOrAddRawDataPackage({ name, dataTransferPackageId: dtp })).toBe(
      pkg,
    );
    const other = await artifacts().addDataTransferPackage({ name: `other-${name}` });
    expect(
      (
        await refusal(
          artifacts().findOrAddRawDataPackage({
            name,
            checksum: 'sha256:00',
            dataTransferPackageId: other,
          }),
        )
      ).message,
    ).toBe(
      `raw data package ${name} already exists (id ${pkg}) with other attributes: its dataTransferPackageId is '${dtp}', not '${other}'; its checksum is unset, not 'sha256:00'; give the attributes it has to reuse it, or choose another name`,
    );
    expect(await count('raw_data_package', `name = '${name}'`)).toBe(1);
  });

  it('findOrAddRawDataFile finds a file by its package and name, and needs the package', async () => {
    const a = await artifacts().addRawDataPackage({ name: `a-${randomUUID()}` });
    const b = await artifacts().addRawDataPackage({ name: `b-${randomUUID()}` });
    const inA = await artifacts().findOrAddRawDataFile({
      name: 'scan_0001.fits',
      rawDataPackageId: a,
      size: 5,
    });
    const inB = await artifacts().findOrAddRawDataFile({
      name: 'scan_0001.fits',
      rawDataPackageId: b,
    });
    expect(inB).not.toBe(inA);
    expect(
      await artifacts().findOrAddRawDataFile({ name: 'scan_0001.fits', rawDataPackageId: a }),
    ).toBe(inA);
    expect(
      (
        await refusal(
          artifacts().findOrAddRawDataFile({
            name: 'scan_0001.fits',
            rawDataPackageId: a,
            size: 6,
          }),
        )
      ).message,
    ).toBe(
      `raw data file scan_0001.fits of package ${a} already exists (id ${inA}) with other attributes: its size is 5, not 6; give the attributes it has to reuse it, or choose another name`,
    );
    const outside = await refusal(artifacts().findOrAddRawDataFile({ name: 'scan_0001.fits' }));
    expect(outside.code).toBe(OpstateErrorCode.BAD_INPUT);
    expect(outside.message).toBe(
      'raw data file scan_0001.fits: findOrAddRawDataFile finds a file by its package and name; give rawDataPackageId, or register a file outside any package with addRawDataFile',
    );
    // Registered twice by plain adds: get-or-create does not guess which one is meant.
    await artifacts().addRawDataFile({ name: 'twice.fits', rawDataPackageId: b });
    await artifacts().addRawDataFile({ name: 'twice.fits', rawDataPackageId: b });
    expect(
      (await refusal(artifacts().findOrAddRawDataFile({ name: 'twice.fits', rawDataPackageId: b })))
        .message,
    ).toMatch(
      /^raw data file twice\.fits of package .* is registered more than once \(ids .*\); findOrAddRawDataFile cannot choose/,
    );
  });

  it('findOrAddCopy returns the live copy when it matches, and names what differs', async () => {
    const site = `s-${randomUUID()}`;
    const at = await artifacts().addLocation({
      site,
      name: 'src',
      locationType: LocationType.SOURCE,
      storageRoot: '/s',
    });
    const pkg = await artifacts().addRawDataPackage({ name: `p-${randomUUID()}` });
    const copy = {
      artifactType: 'raw_data_package',
      artifactId: pkg,
      locationId: at.id,
      path: '/s/p.tar',
    } as const;
    const first = await artifacts().findOrAddCopy(copy);
    expect(first.created).toBe(true);
    expect(await artifacts().findOrAddCopy(copy)).toEqual({ copy: first.copy, created: false });
    expect(await artifacts().findOrAddCopy({ ...copy, path: undefined })).toMatchObject({
      created: false,
    });
    const err = await refusal(artifacts().findOrAddCopy({ ...copy, path: '/s/q.tar', size: 3 }));
    expect(err.message).toBe(
      `a live copy of raw_data_package ${pkg} at location ${at.id} already exists (id ${first.copy.id}) with other attributes: its path is '/s/p.tar', not '/s/q.tar'; its size is unset, not 3; give the attributes it has to reuse it`,
    );
  });

  it('get-or-create is safe against concurrent callers: one row, one id for all', async () => {
    const site = `s-${randomUUID()}`;
    const peer = await backend.peer();
    try {
      const repos = [artifacts(), new ArtifactRepository(peer)];
      const location = {
        site,
        name: 'lta',
        locationType: LocationType.LONG_TERM_ARCHIVE,
        storageRoot: 's3://lta',
      };
      const ids = await Promise.all(
        Array.from(
          { length: 8 },
          async (_, n) => (await repos[n % 2]?.findOrAddLocation(location))?.id,
        ),
      );
      expect(new Set(ids).size).toBe(1);
      expect(await count('data_location', `site = '${site}'`)).toBe(1);
      const pkg = await artifacts().addRawDataPackage({ name: `p-${site}` });
      const files = await Promise.all(
        Array.from({ length: 8 }, (_, n) =>
          repos[n % 2]?.findOrAddRawDataFile({ name: 'scan.fits', rawDataPackageId: pkg }),
        ),
      );
      expect(new Set(files).size).toBe(1);
      expect(await count('raw_data_file', `raw_data_package_id = '${pkg}'`)).toBe(1);
    } finally {
      if (peer !== backend.database()) await peer.close();
    }
  });

  it('lets the sample setup run again: the second run returns the world the first registered', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'opstate-sample-again-'));
    try {
      const site = `s-${randomUUID()}`;
      const options = { site, namePrefix: `${site}-`, packageCount: 2, filesPerPackage: 2 };
      const first = await registerSampleData(artifacts(), dir, options);
      const again = await registerSampleData(artifacts(), dir, options);
      expect(again).toEqual(first);
      expect(await count('data_location', `site = '${options.site}'`)).toBe(4);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}
