import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationKind } from '../machines/OperationKind.ts';
import { defaultPipeline, type Pipeline } from '../machines/pipeline.ts';
import { LocationType } from '../machines/routing.ts';
import type { ArtifactRepository, DataLocation } from '../persistence/ArtifactRepository.ts';
import { ArtifactType } from '../persistence/ArtifactType.ts';
import type { CreateOperationInput } from '../persistence/CreateOperationInput.ts';
import { sha256 } from './packageFormat.ts';
import { checksumOf } from './storage.ts';

/** The site `registerSampleData` registers its locations at unless told another. */
export const SAMPLE_SITE = 'demo-site';

/** The four locations of a small pipeline, each a local folder. */
export interface SampleLocations {
  readonly source: DataLocation;
  readonly buffer: DataLocation;
  readonly archive: DataLocation;
  readonly processing: DataLocation;
}

/** A raw data package as registered: its files' source copies are what packaging consumes. */
export interface SamplePackage {
  readonly id: string;
  readonly name: string;
  readonly fileCopyIds: readonly string[];
}

/** Everything `registerSampleData` created. */
export interface SampleData {
  readonly locations: SampleLocations;
  readonly dataTransferPackage: { readonly id: string; readonly name: string };
  readonly packages: readonly SamplePackage[];
  /** Every registered artifact with its type and name (files, packages, the bundle). */
  readonly artifacts: ReadonlyMap<string, { type: ArtifactType; name: string }>;
}

/** Some bytes that look like an instrument's output, the same on every run. */
function scan(pkg: string, n: number): Buffer {
  const lines = [`SIMPLE  = T / ${pkg} scan ${n}`];
  for (let i = 0; i < 40; i++)
    lines.push(`ROW ${String(i).padStart(3, '0')} ${(i * 7919 + n * 104729) % 65521}`);
  return Buffer.from(`${lines.join('\n')}\nEND\n`);
}

/**
 * Creates a small world under `storageDir`: four locations (source, buffer, long-term archive,
 * processing — folders under `storageDir`), one data transfer package, `packageCount` raw data
 * packages of `filesPerPackage` raw data files each, the files written at the source and
 * registered with their checksums, and one source copy per file. The bytes are the same on every
 * run and every registration is get-or-create, so running it again on the same folder and database
 * returns what the first run registered.
 *
 * @example
 * ```ts
 * const sample = await registerSampleData(runtime.artifacts, '/tmp/demo/storage');
 * ```
 */
export async function registerSampleData(
  artifacts: ArtifactRepository,
  storageDir: string,
  options: {
    site?: string;
    packageCount?: number;
    filesPerPackage?: number;
    /** Put before every artifact name, so that several sample worlds share one database. */
    namePrefix?: string;
    /** Locations already registered (by an earlier call) to use instead of creating four. */
    locations?: SampleLocations;
  } = {},
): Promise<SampleData> {
  const site = options.site ?? SAMPLE_SITE;
  const prefix = options.namePrefix ?? '';
  const location = async (name: string, locationType: LocationType) => {
    const storageRoot = join(storageDir, name);
    await mkdir(storageRoot, { recursive: true });
    return artifacts.findOrAddLocation({ site, name, locationType, storageRoot });
  };
  const locations: SampleLocations = options.locations ?? {
    source: await location('source', LocationType.SOURCE),
    buffer: await location('buffer', LocationType.BUFFER),
    archive: await location('archive', LocationType.LONG_TERM_ARCHIVE),
    processing: await location('processing', LocationType.PROCESSING),
  };
  const names = new Map<string, { type: ArtifactType; name: string }>();
  const bundleName = `${prefix}dtp-2024-01`;
  const bundleId = await artifacts.findOrAddDataTransferPackage({ name: bundleName });
  names.set(bundleId, { type: ArtifactType.DATA_TRANSFER_PACKAGE, name: bundleName });

  const packages: SamplePackage[] = [];
  for (let p = 1; p <= (options.packageCount ?? 3); p++) {
    const name = `${prefix}obs-2024-${String(p).padStart(3, '0')}`;
    const id = await artifacts.findOrAddRawDataPackage({ name, dataTransferPackageId: bundleId });
    names.set(id, { type: ArtifactType.RAW_DATA_PACKAGE, name });
    const fileCopyIds: string[] = [];
    for (let f = 1; f <= (options.filesPerPackage ?? 3); f++) {
      const fileName = `scan_${String(f).padStart(4, '0')}.fits`;
      const data = scan(name, f);
      const path = join(locations.source.storageRoot, name, fileName);
      await mkdir(join(locations.source.storageRoot, name), { recursive: true });
      await writeFile(path, data);
      const checksum = checksumOf(sha256(data));
      const fileId = await artifacts.findOrAddRawDataFile({
        name: fileName,
        rawDataPackageId: id,
        checksum,
        size: data.length,
      });
      names.set(fileId, { type: ArtifactType.RAW_DATA_FILE, name: `${name}/${fileName}` });
      const { copy } = await artifacts.findOrAddCopy({
        artifactType: ArtifactType.RAW_DATA_FILE,
        artifactId: fileId,
        locationId: locations.source.id,
        path,
        checksum,
        size: data.length,
      });
      fileCopyIds.push(copy.id);
    }
    packages.push({ id, name, fileCopyIds });
  }
  return {
    locations,
    dataTransferPackage: { id: bundleId, name: bundleName },
    packages,
    artifacts: names,
  };
}

/**
 * The entry stage of the sample: one packaging per package, at the source, consuming its files'
 * source copies. What is submitted; a declared pipeline creates every later stage.
 *
 * @example
 * ```ts
 * await runtime.submitMany(samplePackaging(sample).map((p) => ({ ...p, by: 'demo' })));
 * ```
 */
export function samplePackaging(sample: SampleData): CreateOperationInput[] {
  return sample.packages.map((p) => ({
    kind: OperationKind.RAW_DATA_PACKAGE,
    fields: { rawDataPackageId: p.id, locationId: sample.locations.source.id },
    inputs: [...p.fileCopyIds],
  }));
}

/**
 * The default pipeline over the sample's locations at `site` (one destination site): package and
 * bundle at the source, transfer to the buffer, unpack there, archive each package into the
 * long-term archive. The processing location is not in it: staging is on request.
 *
 * @example
 * ```ts
 * const runtime = await createRuntime({ pipeline: samplePipelineDefinition() });
 * ```
 */
export function samplePipelineDefinition(site: string = SAMPLE_SITE): Pipeline {
  return defaultPipeline({
    source: { site, name: 'source' },
    destinations: [{ buffer: { site, name: 'buffer' }, archive: { site, name: 'archive' } }],
  });
}
