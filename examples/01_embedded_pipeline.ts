/**
 * 01 — A pipeline step embedded in one process: a stage service registers what it archives,
 * runs a control plane and a worker beside its own code, submits a long-term archive and waits
 * for it. The archive stage is opstate's (`defineArchiveStage`): it stores the package only if
 * its key is free, reads it back, verifies every member and records each step, around the store
 * of the archive location (here a local folder; `registerArchiveStore` adds others).
 *
 *   node --import tsx examples/01_embedded_pipeline.ts
 *
 * Without DATABASE_URL and NATS_URL it runs embedded (a private Postgres in ./.opstate and the
 * in-process transport); with them, on those servers. Run it again: the setup finds what it
 * registered, and the archive is already done.
 */
// #region quick-start
import { resolve } from 'node:path';
import { createRuntime, defineArchiveStage, LocationType, OperationKind } from 'opstate';

const runtime = await createRuntime(); // DATABASE_URL / NATS_URL from the environment, else embedded
// findOrAdd…: setup that runs again at every start gets back what it registered the first time
const source = await runtime.artifacts.findOrAddLocation({
  site: 'cologne',
  name: 'instrument-folder',
  locationType: LocationType.SOURCE,
  storageRoot: resolve('.opstate', 'example-raw'),
});
const archive = await runtime.artifacts.findOrAddLocation({
  site: 'cologne',
  name: 'lta-folder',
  locationType: LocationType.LONG_TERM_ARCHIVE,
  storageRoot: resolve('.opstate', 'example-lta'), // a path: the local folder store
});
const pkg = await runtime.artifacts.findOrAddRawDataPackage({ name: 'obs-2026-11-29' });
const { copy } = await runtime.artifacts.findOrAddCopy({
  artifactType: 'raw_data_package',
  artifactId: pkg,
  locationId: source.id,
  path: await instrumentFolder('obs-2026-11-29'), // MANIFEST.json and the files it names
});

runtime.startControlPlane(); // scheduler, dispatch relay, heartbeat monitor, reconciler (one leader)
runtime.startWorker({
  kinds: [OperationKind.LONG_TERM_ARCHIVE],
  handlers: {
    // Plan, put if absent, read back, verify, record: every step journaled, none repeated.
    [OperationKind.LONG_TERM_ARCHIVE]: defineArchiveStage(),
  },
});
const id = await runtime.submit({
  kind: OperationKind.LONG_TERM_ARCHIVE,
  fields: { rawDataPackageId: pkg, sourceLocationId: source.id, destinationLocationId: archive.id },
  inputs: [copy.id],
  by: 'ingest', // optional: who submits, as the history records it
});

// #endregion quick-start

// What the example adds around the README's quick start: waiting, printing, the instrument's folder.
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationStatus } from 'opstate';

// Wait for it: the operation's row says where it is; its history says how it got there.
let operation = await runtime.get(id);
while (
  operation.status !== OperationStatus.COMPLETED &&
  operation.status !== OperationStatus.FAILED
) {
  await new Promise((done) => setTimeout(done, 100));
  operation = await runtime.get(id);
}
for (const t of operation.transitions) {
  console.log(`${t.from ?? '∅'} → ${t.to}  ${t.event} by ${t.by}`);
}
console.log(`${operation.kind} ${id}: ${operation.status}`, operation.outputs[0]?.checksum ?? '');
await runtime.close();

/**
 * Stands in for an instrument's output: a folder under ./.opstate/example-raw holding one file and
 * the `MANIFEST.json` that names it with its size and sha256 (written once; a later run finds it).
 */
async function instrumentFolder(name: string): Promise<string> {
  const folder = resolve('.opstate', 'example-raw', name);
  const data = Buffer.from(`the frames of ${name}\n`);
  const sha256 = createHash('sha256').update(data).digest('hex');
  const manifest = { members: [{ name: 'scan.fits', size: data.length, sha256 }] };
  await mkdir(folder, { recursive: true });
  const once = (file: string, bytes: string | Buffer) =>
    writeFile(join(folder, file), bytes, { flag: 'wx' }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  await once('scan.fits', data);
  await once('MANIFEST.json', `${JSON.stringify(manifest, null, 2)}\n`);
  return folder;
}
