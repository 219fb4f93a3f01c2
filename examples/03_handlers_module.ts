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
 * serves. Its handler opens the database the worker is configured for (the same environment)
 * to read where each location's files are.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  ArtifactRepository,
  type Database,
  databaseOptionsOf,
  loadConfiguration,
  type OperationHandler,
  OperationKind,
  OpstateError,
  OpstateErrorCode,
  openDatabase,
} from 'opstate';

let database: Promise<Database> | undefined;

/** The module's own connection, opened on first use with the worker's configuration. */
function databaseOf(): Promise<Database> {
  database ??= openDatabase({ ...databaseOptionsOf(loadConfiguration()), max: 2 });
  return database;
}

const transfer: OperationHandler = async (ctx) => {
  const { inputs } = await ctx.inspect();
  const [input] = inputs;
  const [required] = await ctx.requiredOutputs();
  if (input === undefined || required === undefined) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'a transfer needs its package copy');
  }
  const locations = await new ArtifactRepository(await databaseOf()).locationsById([
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

/** Called by the worker when it stops: closes the module's connection. */
export async function close(): Promise<void> {
  const open = database;
  database = undefined;
  if (open !== undefined) await (await open).close();
}
