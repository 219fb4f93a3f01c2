/**
 * 02 — The same runtime split over NATS: a control plane, workers and a submitter, each its own
 * process, sharing one Postgres and one NATS JetStream. Start them in three terminals:
 *
 *   export DATABASE_URL=postgres://postgres@127.0.0.1:5432/opstate_example NATS_URL=nats://127.0.0.1:4222
 *   export OPSTATE_NATS_INSECURE=1   # a development nats-server without authorization (else refused)
 *   node --import tsx examples/02_control_plane_and_worker.ts control-plane   # creates the stream
 *   node --import tsx examples/02_control_plane_and_worker.ts worker          # any number of these
 *   node --import tsx examples/02_control_plane_and_worker.ts submit          # one transfer, waits
 *
 * The worker copies a data transfer package's file from the source location's folder to the
 * destination's; every location's storage root is a local folder under OPSTATE_EXAMPLE_STORAGE
 * (default /tmp/opstate-example), so run the processes on one machine or mount it everywhere.
 * Stop the long-running ones with Ctrl-C.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  createRuntime,
  LocationType,
  type OperationHandler,
  OperationKind,
  OperationStatus,
  OpstateError,
  OpstateErrorCode,
  type Runtime,
} from 'opstate';

const storage = process.env.OPSTATE_EXAMPLE_STORAGE ?? '/tmp/opstate-example';
const role = process.argv[2];

function untilStopped(): Promise<string> {
  return new Promise((stop) => {
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
}

/** Copies the input copy to the destination and returns the copy it made, with its digest. */
function transferHandler(runtime: Runtime): OperationHandler {
  return async (ctx) => {
    const { inputs } = await ctx.inspect();
    const [input] = inputs;
    const [required] = await ctx.requiredOutputs(); // the package's copy at the destination
    if (input === undefined || required === undefined) {
      throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'a transfer needs its package copy');
    }
    const roots = new Map(
      (await runtime.artifacts.locationsById([input.locationId, required.locationId])).map((l) => [
        l.id,
        l.storageRoot,
      ]),
    );
    const path = input.path ?? `${required.artifactId}.tar`;
    // A journal step: done once, even if this worker dies after it and another attempt runs.
    const checksum = await ctx.step('copy', async () => {
      const bytes = await readFile(join(roots.get(input.locationId) ?? '', path), {
        signal: ctx.signal,
      });
      const target = join(roots.get(required.locationId) ?? '', path);
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, bytes, { signal: ctx.signal });
      return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    });
    return { outputs: [{ ...required, path, checksum }] };
  };
}

/**
 * The example's two locations, registered once (a second call finds them). The control plane
 * registers them at start, so a worker started after it reads their queues at once: a worker
 * looks for locations registered while it runs only every discovery interval (5 s).
 */
async function exampleLocations(runtime: Runtime) {
  const site = 'example';
  const locationOf = (name: string, locationType: LocationType) =>
    runtime.artifacts.findOrAddLocation({
      site,
      name,
      locationType,
      storageRoot: join(storage, name),
    });
  return {
    source: await locationOf('instrument', LocationType.SOURCE),
    buffer: await locationOf('buffer', LocationType.BUFFER),
  };
}

async function submitOne(runtime: Runtime): Promise<void> {
  const { source, buffer } = await exampleLocations(runtime);
  const name = `dtp-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  const dtp = await runtime.artifacts.addDataTransferPackage({ name });
  const path = `${name}.tar`;
  await mkdir(source.storageRoot, { recursive: true });
  await writeFile(join(source.storageRoot, path), `the bundle ${name}\n`);
  const { copy } = await runtime.artifacts.addCopy({
    artifactType: 'data_transfer_package',
    artifactId: dtp,
    locationId: source.id,
    path,
  });
  const id = await runtime.submit({
    kind: OperationKind.TRANSFER,
    fields: {
      dataTransferPackageId: dtp,
      sourceLocationId: source.id,
      destinationLocationId: buffer.id,
    },
    inputs: [copy.id],
    by: 'example-submitter',
  });
  console.log(`submitted transfer ${id}; waiting for a worker`);
  let operation = await runtime.get(id);
  while (
    operation.status !== OperationStatus.COMPLETED &&
    operation.status !== OperationStatus.FAILED
  ) {
    await new Promise((done) => setTimeout(done, 200));
    operation = await runtime.get(id);
  }
  for (const t of operation.transitions) {
    console.log(`${t.from ?? '∅'} → ${t.to}  ${t.event} by ${t.by}`);
  }
  console.log(`${id}: ${operation.status}`, operation.lastError?.message ?? '');
}

if (process.env.DATABASE_URL === undefined || process.env.NATS_URL === undefined) {
  console.error('set DATABASE_URL and NATS_URL: this example runs its processes apart');
  process.exit(2);
}
if (role === 'control-plane') {
  // Creates the dispatch stream, its consumers and the heartbeat bucket; replicas share one lease.
  const runtime = await createRuntime({ waitForServers: true, serviceName: 'example' });
  await exampleLocations(runtime);
  const plane = runtime.startControlPlane();
  console.log(`control plane ${plane.holder} running; Ctrl-C stops it`);
  await untilStopped();
  await runtime.close();
} else if (role === 'worker') {
  // A worker creates nothing on NATS (least-privilege credentials suffice): start a control plane first.
  const runtime = await createRuntime({ waitForServers: true, ensureTransport: false });
  const worker = runtime.startWorker({
    kinds: [OperationKind.TRANSFER],
    handlers: { [OperationKind.TRANSFER]: transferHandler(runtime) },
    concurrency: 4,
  });
  console.log(`worker ${worker.id} serving transfer; Ctrl-C stops it`);
  await untilStopped();
  await runtime.close(); // stops the worker, hands back what it holds, closes the connections
} else if (role === 'submit') {
  const runtime = await createRuntime({ ensureTransport: false });
  try {
    await submitOne(runtime);
  } finally {
    await runtime.close();
  }
} else {
  console.error('usage: 02_control_plane_and_worker.ts control-plane | worker | submit');
  process.exit(2);
}
