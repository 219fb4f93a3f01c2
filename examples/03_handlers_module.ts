/**
 * 03 — A handlers module for `opstate worker --handlers`: the transfer of example 02 as a module
 * the command-line worker loads, instead of a process of your own. It default-exports handlers
 * keyed by operation kind and a `close()` the worker calls when it stops. The worker loads
 * JavaScript, so compile it first (here against the built package, as a user's project would):
 *
 *   npx tsc --outDir examples/dist --rootDir examples --module nodenext --target es2022 --skipLibCheck examples/03_handlers_module.ts
 *   npx opstate worker --kinds transfer --handlers examples/dist/03_handlers_module.js
 *
 * with DATABASE_URL and NATS_URL set as for example 02, whose control plane and submitter it
 * serves. Its handler opens a runtime of its own on the worker's configuration (the same
 * environment), starting nothing on it, to read where each location's files are.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  createRuntime,
  type OperationHandler,
  OperationKind,
  OpstateError,
  OpstateErrorCode,
  type Runtime,
} from 'opstate';

let runtime: Promise<Runtime> | undefined;

/**
 * The module's own runtime, opened on first use with the worker's configuration: it runs no
 * actor and creates nothing on NATS, it only reads the registered locations.
 */
function runtimeOf(): Promise<Runtime> {
  runtime ??= createRuntime({ ensureTransport: false, migrate: false });
  return runtime;
}

const transfer: OperationHandler = async (ctx) => {
  const { inputs } = await ctx.inspect();
  const [input] = inputs;
  const [required] = await ctx.requiredOutputs();
  if (input === undefined || required === undefined) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'a transfer needs its package copy');
  }
  const locations = await (await runtimeOf()).artifacts.locationsById([
    input.locationId,
    required.locationId,
  ]);
  const rootOf = (id: string) => {
    const root = locations.find((l) => l.id === id)?.storageRoot;
    // Not retryable: another attempt would find the same rows.
    if (root === undefined) throw new OpstateError(OpstateErrorCode.BAD_INPUT, `no location ${id}`);
    return root;
  };
  const path = input.path ?? `${required.artifactId}.tar`;
  const checksum = await ctx.step('copy', async () => {
    const bytes = await readFile(join(rootOf(input.locationId), path), { signal: ctx.signal });
    const target = join(rootOf(required.locationId), path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, bytes, { signal: ctx.signal });
    return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  });
  return { outputs: [{ ...required, path, checksum }] };
};

/** Handlers keyed by operation kind: `--kinds` may name only kinds listed here. */
export default { [OperationKind.TRANSFER]: transfer };

/** Called by the worker when it stops: closes the module's runtime. */
export async function close(): Promise<void> {
  const open = runtime;
  runtime = undefined;
  if (open !== undefined) await (await open).close();
}
