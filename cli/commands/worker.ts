import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { OperationHandler, WorkerFaults } from '../../actors/Worker.ts';
import {
  isOperationKind,
  OPERATION_KINDS,
  type OperationKind,
} from '../../machines/OperationKind.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { openProcessRuntime } from '../processRuntime.ts';
import { untilSignal } from '../runtimeFromEnv.ts';

interface HandlersModule {
  readonly table: Partial<Record<OperationKind, OperationHandler>>;
  readonly faults: WorkerFaults | undefined;
  /** The module's own `close()`, called when the worker stops (its connections, files). */
  readonly close: (() => Promise<void>) | undefined;
}

/**
 * A handlers module: JavaScript (`.js`/`.mjs`) that default-exports handlers keyed by operation
 * kind, `export default { <kind>: async (ctx) => ({ outputs }), … }`. A crash drill's module may
 * also `export const faults = { beforeStart() {…} }`; those are honoured only with `--faults`.
 */
async function loadHandlers(path: string): Promise<HandlersModule> {
  let mod: { default?: unknown; faults?: WorkerFaults; close?: unknown };
  try {
    mod = (await import(pathToFileURL(resolve(path)).href)) as typeof mod;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_UNKNOWN_FILE_EXTENSION') {
      throw new UsageError(
        `${path} is not JavaScript; compile it to .js or .mjs (e.g. with tsc) and pass that file`,
      );
    }
    if (code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(resolve(path))) {
      throw new UsageError(
        `${path} does not exist; pass the path of a .js or .mjs handlers module`,
      );
    }
    throw err;
  }
  const table = mod.default;
  if (typeof table !== 'object' || table === null) {
    throw new UsageError(
      `${path} must default-export an object of handlers keyed by operation kind`,
    );
  }
  for (const [key, fn] of Object.entries(table)) {
    if (!isOperationKind(key)) throw new UsageError(`${path}: '${key}' is not an operation kind`);
    if (typeof fn !== 'function')
      throw new UsageError(`${path}: the handler for '${key}' is not a function`);
  }
  const close = typeof mod.close === 'function' ? (mod.close as () => Promise<void>) : undefined;
  return { table: table as HandlersModule['table'], faults: mod.faults, close };
}

/** `opstate worker --kinds a,b --handlers ./handlers.ts`: runs handlers for those kinds. */
export const workerCommand: Command = {
  name: 'worker',
  summary: 'Run a worker for some operation kinds until SIGINT/SIGTERM',
  usage:
    'opstate worker --kinds <kind,kind…|all> --handlers <module.js> [--concurrency N] [--id NAME] [--faults] [--metrics-port PORT]',
  async run(args, io) {
    const { values, positionals } = parseFlags(args, {
      kinds: { type: 'string' },
      handlers: { type: 'string' },
      concurrency: { type: 'string' },
      id: { type: 'string' },
      faults: { type: 'boolean' },
      'metrics-port': { type: 'string' },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    if (values.kinds === undefined) throw new UsageError('--kinds is required');
    if (values.handlers === undefined)
      throw new UsageError(
        '--handlers is required (a module that default-exports handlers by kind)',
      );
    const kinds =
      values.kinds === 'all' ? [...OPERATION_KINDS] : values.kinds.split(',').map((k) => k.trim());
    for (const k of kinds) {
      if (!isOperationKind(k)) {
        throw new UsageError(`'${k}' is not an operation kind; use ${OPERATION_KINDS.join(', ')}`);
      }
    }
    const concurrency = values.concurrency === undefined ? 4 : Number(values.concurrency);
    if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
      throw new UsageError(`--concurrency must be a whole number ≥ 1, got '${values.concurrency}'`);
    }
    const { table, faults, close } = await loadHandlers(values.handlers);
    const missing = (kinds as OperationKind[]).filter((k) => table[k] === undefined);
    if (missing.length > 0)
      throw new UsageError(`${values.handlers} has no handler for ${missing.join(', ')}`);
    const proc = await openProcessRuntime('worker', { metricsPort: values['metrics-port'] });
    const { runtime } = proc;
    const worker = runtime.startWorker({
      kinds: kinds as OperationKind[],
      handlers: table as Record<OperationKind, OperationHandler>,
      concurrency,
      ...(values.id === undefined ? {} : { workerId: values.id }),
      ...(faults === undefined || values.faults !== true ? {} : { faults }),
    });
    if (faults !== undefined && values.faults !== true) {
      runtime.logger.log(
        'WARNING',
        'the handlers module exports faults; ignored without --faults',
        {
          handlers: values.handlers,
        },
      );
    }
    const server = await proc.serve({ worker });
    io.out(
      `worker ${worker.id} started for ${kinds.join(', ')}${server === undefined ? '' : `; metrics on port ${server.port}`}`,
    );
    const signal = await untilSignal();
    io.out(`${signal}: stopping worker ${worker.id}`);
    await proc.close();
    await close?.();
    return 0;
  },
};
