/**
 * 01 — A pipeline step embedded in one process: a stage service registers what it archives,
 * runs a control plane and a worker beside its own code, submits a long-term archive and waits
 * for it. The handler's upload is a journal step (`ctx.step`): a later attempt after a crash
 * gets the recorded digest back instead of uploading again.
 *
 *   node --import tsx examples/01_embedded_pipeline.ts
 *
 * Without DATABASE_URL and NATS_URL it runs embedded (a private Postgres in ./.opstate and the
 * in-process transport); with them, on those servers. Run it again: the setup finds what it
 * registered, and the archive is already done.
 */
// #region quick-start
import { createRuntime, LocationType, OperationKind } from 'opstate';

const runtime = await createRuntime(); // DATABASE_URL / NATS_URL from the environment, else embedded
// findOrAdd…: setup that runs again at every start gets back what it registered the first time
const source = await runtime.artifacts.findOrAddLocation({
  site: 'cologne',
  name: 'instrument',
  locationType: LocationType.SOURCE,
  storageRoot: '/data/raw',
});
const archive = await runtime.artifacts.findOrAddLocation({
  site: 'cologne',
  name: 'lta',
  locationType: LocationType.LONG_TERM_ARCHIVE,
  storageRoot: 's3://lta',
});
const pkg = await runtime.artifacts.findOrAddRawDataPackage({ name: 'obs-2026-11-29' });
const { copy } = await runtime.artifacts.findOrAddCopy({
  artifactType: 'raw_data_package',
  artifactId: pkg,
  locationId: source.id,
});

runtime.startControlPlane(); // scheduler, outbox relay, heartbeat monitor, reconciler (one leader)
runtime.startWorker({
  kinds: [OperationKind.LONG_TERM_ARCHIVE],
  handlers: {
    [OperationKind.LONG_TERM_ARCHIVE]: async (ctx) => {
      const { fields } = await ctx.inspect();
      const etag = await ctx.step('upload', () => upload(fields, ctx.signal)); // journaled: not repeated on a re-run
      return {
        outputs: [
          {
            artifactType: 'raw_data_package',
            artifactId: pkg,
            locationId: archive.id,
            checksum: etag,
          },
        ],
      };
    },
  },
});
const id = await runtime.submit({
  kind: OperationKind.LONG_TERM_ARCHIVE,
  fields: { rawDataPackageId: pkg, sourceLocationId: source.id, destinationLocationId: archive.id },
  inputs: [copy.id],
  by: 'ingest', // optional: who submits, as the history records it
});

// #endregion quick-start

// What the example adds around the README's quick start: waiting, printing, the upload stand-in.
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
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
 * Stands in for an object store's client: writes the package's archive object under
 * ./.opstate/example-storage and returns its digest.
 */
async function upload(fields: Readonly<Record<string, string | null>>, signal: AbortSignal) {
  signal.throwIfAborted();
  const body = `the archive of raw data package ${fields.rawDataPackageId}\n`;
  const folder = resolve('.opstate', 'example-storage', 'raw_data_package');
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, `${fields.rawDataPackageId}.tar`), body, { signal });
  return `sha256:${createHash('sha256').update(body).digest('hex')}`;
}
