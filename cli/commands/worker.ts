import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { DeleterFaults } from '../../actors/runDeletion.ts';
import type { OperationHandler, WorkerFaults } from '../../actors/Worker.ts';
import {
  isOperationKind,
  OPERATION_KINDS,
  type OperationKind,
} from '../../machines/OperationKind.ts';
import { type Command, parseFlags, UsageError } from '../Command.ts';
import { runtimeFromEnv, surviveStrayRejections, untilSignal } from '../runtimeFromEnv.ts';

interface HandlersModule {
  readonly table: Partial<Record<OperationKind, OperationHandler>>;
  readonly faults: (WorkerFaults & DeleterFaults) | undefined;
}

/**
 * A handlers module: `export default { <kind>: async (ctx) => ({ outputs }), … }`, and, for crash
 * drills only, `export const faults = { beforeStart() {…} }`.
 */
async function loadHandlers(path: string): Promise<HandlersModule> {
  const mod = (await import(pathToFileURL(resolve(path)).href)) as {
    default?: unknown;
    faults?: WorkerFaults & DeleterFaults;
  };
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
  return { table: table as HandlersModule['table'], faults: mod.faults };
}

/** `opstate worker --kinds a,b --handlers ./handlers.ts`: runs handlers for those kinds. */
export const workerCommand: Command = {
  name: 'worker',
  summary: 'Run a worker for some operation kinds until SIGINT/SIGTERM',
  usage:
    'opstate worker --kinds <kind,kind…|all> --handlers <module> [--concurrency N] [--id NAME] [--delete-copies [--deleter-lease-ms N] [--deleter-interval-ms N]]',
  help: [
    '',
    '  --kinds <kind,kind…|all>  operation kinds to serve (one queue per kind and location type)',
    '  --handlers <module>       a module that default-exports { <kind>: async (ctx) => ({ outputs }) }',
    '                            whose outputs include what each kind must produce, else the',
    '                            attempt fails for good (the README lists it per kind)',
    '  --concurrency N           operations this worker process holds at once, across all its',
    '                            queues, pulled or running (default 4); with fewer than its',
    '                            queues, the queues take turns',
    '  --id NAME                 the worker id in transitions and in its heartbeat (letters,',
    '                            digits, - _ =; default worker-<random>)',
    '  --delete-copies           also run a copy deleter: source copies eligible under the',
    '                            deletion policy are revalidated and deleted after their',
    '                            verified archive (this host must see their storage)',
    '  --deleter-lease-ms N      how long a deleter holds a deletion between renewals',
    '  --deleter-interval-ms N   how often the deleter looks for eligible copies',
    '',
    'Starts without the database or the broker: it waits for them and retries, and exits only',
    'on a configuration error.',
  ],
  async run(args, io) {
    const { values, positionals } = parseFlags(args, {
      kinds: { type: 'string' },
      handlers: { type: 'string' },
      concurrency: { type: 'string' },
      id: { type: 'string' },
      'delete-copies': { type: 'boolean' },
      'deleter-lease-ms': { type: 'string' },
      'deleter-interval-ms': { type: 'string' },
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
    const ms = (flag: string, value: string | undefined) => {
      if (value === undefined) return undefined;
      const n = Number(value);
      if (!Number.isSafeInteger(n) || n < 1)
        throw new UsageError(`${flag} must be a whole number ≥ 1`);
      return n;
    };
    const leaseMs = ms('--deleter-lease-ms', values['deleter-lease-ms']);
    const intervalMs = ms('--deleter-interval-ms', values['deleter-interval-ms']);
    const { table, faults } = await loadHandlers(values.handlers);
    const missing = (kinds as OperationKind[]).filter((k) => table[k] === undefined);
    if (missing.length > 0)
      throw new UsageError(`${values.handlers} has no handler for ${missing.join(', ')}`);
    surviveStrayRejections();
    const runtime = await runtimeFromEnv({ waitForServers: true });
    const worker = runtime.startWorker({
      kinds: kinds as OperationKind[],
      handlers: table as Record<OperationKind, OperationHandler>,
      concurrency,
      ...(values.id === undefined ? {} : { workerId: values.id }),
      ...(faults === undefined ? {} : { faults }),
    });
    io.out(`worker ${worker.id} started for ${kinds.join(', ')}`);
    if (values['delete-copies'] === true) {
      const deleter = runtime.startCopyDeleter({
        id: `${worker.id}-deleter`,
        ...(leaseMs === undefined ? {} : { leaseMs }),
        ...(intervalMs === undefined ? {} : { intervalMs }),
        ...(faults === undefined ? {} : { faults }),
      });
      io.out(`deleter ${deleter.id} started (the deletion policy decides what it deletes)`);
    }
    const signal = await untilSignal();
    io.out(`${signal}: stopping worker ${worker.id}`);
    await runtime.close();
    return 0;
  },
};
