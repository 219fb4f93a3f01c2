import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from 'commander';
import type { DeleterFaults } from '../../deleter/runDeletion.ts';
import { withFaults } from '../../loops/drill.ts';
import {
  isOperationKind,
  OPERATION_KINDS,
  type OperationKind,
} from '../../machines/OperationKind.ts';
import { DEFAULT_DISCOVERY_INTERVAL_MS } from '../../machines/routing.ts';
import type { Runtime } from '../../runtime/Runtime.ts';
import type { OperationHandler } from '../../worker/OperationHandler.ts';
import type { Worker } from '../../worker/Worker.ts';
import type { WorkerFaults } from '../../worker/WorkerFaults.ts';
import { defineCommand, type Io, optionsOf, UsageError, wholeNumber } from '../Command.ts';
import { openProcessRuntime } from '../processRuntime.ts';
import { surviveStrayRejections, untilSignal } from '../runtimeFromEnv.ts';
import { withServiceOptions } from '../serviceOptions.ts';

interface HandlersModule {
  readonly table: Partial<Record<OperationKind, OperationHandler>>;
  readonly faults: (WorkerFaults & DeleterFaults) | undefined;
  /** The module's own `close()`, called when the worker stops (its connections, files). */
  readonly close: (() => Promise<void>) | undefined;
}

/**
 * A handlers module: JavaScript (`.js`/`.mjs`) that default-exports handlers keyed by operation
 * kind, `export default { <kind>: async (ctx) => ({ outputs }), … }`. A crash drill's module may
 * also `export const faults = { beforeStart() {…} }`; those are honoured only with `--faults`.
 */
async function loadHandlers(path: string): Promise<HandlersModule> {
  let mod: { default?: unknown; faults?: WorkerFaults & DeleterFaults; close?: unknown };
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

const SUMMARY = 'Run a worker for some operation kinds until SIGINT/SIGTERM';

function kindsOf(value: string): OperationKind[] {
  const kinds = value === 'all' ? [...OPERATION_KINDS] : value.split(',').map((k) => k.trim());
  for (const k of kinds) {
    if (!isOperationKind(k)) {
      throw new InvalidArgumentError(
        `'${k}' is not an operation kind; use ${OPERATION_KINDS.join(', ')} or all`,
      );
    }
  }
  return kinds as OperationKind[];
}

/** The options of `opstate worker`, as parsed. */
type WorkerOptions = {
  kinds: OperationKind[];
  handlers: string;
  concurrency: number;
  id?: string;
  faults?: boolean;
  metricsPort?: string;
  metricsHost?: string;
  insecureNats?: boolean;
  deleteCopies?: boolean;
  deleterLeaseMs?: number;
  deleterOpenWaitMs?: number;
  deleterIntervalMs?: number;
  inProcess?: boolean;
  site?: string;
  locations?: string[];
  discoveryIntervalMs?: number;
};

/**
 * Runs a worker (and, with --delete-copies, a deleter) on the handlers module until SIGINT or
 * SIGTERM, or until a live process with the same id refuses it.
 */
async function runWorker(values: WorkerOptions, io: Io): Promise<number> {
  const { kinds } = values;
  if (values.locations !== undefined && values.site === undefined) {
    throw new UsageError('--locations names locations of one site: give --site too');
  }
  const { table, faults, close } = await loadHandlers(values.handlers);
  const missing = kinds.filter((k) => table[k] === undefined);
  if (missing.length > 0) {
    throw new UsageError(`${values.handlers} has no handler for ${missing.join(', ')}`);
  }
  const proc = await openProcessRuntime('worker', {
    metricsPort: values.metricsPort,
    metricsHost: values.metricsHost,
    insecureNats: values.insecureNats,
    workerId: values.id,
    inProcess: values.inProcess,
    io: io,
  });
  surviveStrayRejections(proc.logger);
  const { runtime } = proc;
  const worker = runtime.startWorker({
    kinds,
    handlers: table as Record<OperationKind, OperationHandler>,
    concurrency: values.concurrency,
    ...(values.id === undefined ? {} : { workerId: values.id }),
    ...(values.site === undefined ? {} : { site: values.site }),
    ...(values.locations === undefined ? {} : { locations: values.locations }),
    ...(values.discoveryIntervalMs === undefined
      ? {}
      : { discoveryIntervalMs: values.discoveryIntervalMs }),
    ...withFaults(values.faults === true ? faults : undefined),
  });
  if (faults !== undefined && values.faults !== true) {
    runtime.logger.log('WARNING', 'the handlers module exports faults; ignored without --faults', {
      handlers: values.handlers,
    });
  }
  proc.serve({ worker });
  const { server } = proc;
  // Listening for SIGINT/SIGTERM before the ready line: a supervisor may signal as soon as it reads it.
  const stopping = untilSignal();
  // The ready line is printed once the worker reads its queues: its id claimed, its consumers in
  // place. A live process already running under this id, or an unknown site or location, refuses
  // this one instead (CONFIG, exit 2), and no ready line is printed.
  const start = await Promise.race([
    stopping,
    worker.ready.then(
      () => ({ ok: true as const }),
      (err: unknown) => ({ ok: false as const, err }),
    ),
  ]);
  if (typeof start !== 'string' && !start.ok) {
    await proc.close();
    await close?.();
    throw start.err;
  }
  if (typeof start !== 'string') announce(values, { kinds, runtime, worker, server, faults }, io);
  const outcome = typeof start === 'string' ? start : await stopping;
  io.out(`${outcome}: stopping worker ${worker.id}`);
  await proc.close();
  await close?.();
  return 0;
}

/** The worker's ready line, and the deleter it runs beside it with --delete-copies. */
function announce(
  values: WorkerOptions,
  started: {
    kinds: readonly string[];
    runtime: Runtime;
    worker: Worker;
    server: { port: number } | undefined;
    faults: HandlersModule['faults'];
  },
  io: Io,
): void {
  const { kinds, runtime, worker, server, faults } = started;
  io.out(
    `worker ${worker.id} started for ${kinds.join(', ')}${values.site === undefined ? '' : ` at site ${values.site}`} (${runtime.mode.database}, ${runtime.mode.transport})${server === undefined ? '' : `; metrics on port ${server.port}`}`,
  );
  if (values.deleteCopies !== true) return;
  const deleter = runtime.startCopyDeleter({
    id: `${worker.id}-deleter`,
    ...(values.deleterLeaseMs === undefined ? {} : { leaseMs: values.deleterLeaseMs }),
    ...(values.deleterIntervalMs === undefined ? {} : { intervalMs: values.deleterIntervalMs }),
    ...(values.deleterOpenWaitMs === undefined ? {} : { openWaitMs: values.deleterOpenWaitMs }),
    ...withFaults(values.faults === true ? faults : undefined),
  });
  io.out(`deleter ${deleter.id} started (the deletion policy decides what it deletes)`);
}

/** `opstate worker --kinds a,b --handlers ./handlers.js`: runs handlers for those kinds. */
export const workerCommand = defineCommand('worker', SUMMARY, (program, ctx) => {
  withServiceOptions(
    program
      .command('worker')
      .description(SUMMARY)
      .requiredOption('--kinds <kinds>', 'kinds to serve: kind,kind… or all', kindsOf)
      .requiredOption(
        '--handlers <module>',
        'a .js/.mjs module that default-exports handlers keyed by operation kind, whose outputs include what each kind must produce (else the attempt fails for good; the README lists it per kind)',
      )
      .option(
        '--concurrency <n>',
        'operations this worker process holds at once, across all its queues, pulled or running (with fewer slots than queues, the queues take turns)',
        wholeNumber(1),
        4,
      )
      .option(
        '--id <name>',
        'the worker id in transitions and in its heartbeat (letters, digits, - _ =)',
      )
      .option(
        '--site <site>',
        "read only the queues of this site's locations (discovered from those registered, and again every discovery interval); without it, every site's and the legacy queues",
      )
      .option(
        '--locations <names>',
        'with --site: only these of its locations, name,name…',
        (v: string) => v.split(',').map((n) => n.trim()),
      )
      .option(
        '--discovery-interval-ms <n>',
        `how often it looks for locations registered since (default ${DEFAULT_DISCOVERY_INTERVAL_MS})`,
        wholeNumber(1),
      )
      .option('--faults', "honour the module's faults export (crash drills only)")
      .option(
        '--in-process',
        'run without NATS_URL, on the in-process transport: no work from another process reaches it',
      ),
  )
    .option('--delete-copies', 'also run a deleter (the deletion policy decides what it deletes)')
    .option('--deleter-lease-ms <n>', "how long a deleter's claim on a copy lasts", wholeNumber(1))
    .option('--deleter-interval-ms <n>', 'how often the deleter looks for work', wholeNumber(1))
    .option(
      '--deleter-open-wait-ms <n>',
      'how long a member some process holds open is rechecked before the deleter keeps it (default 5000)',
      wholeNumber(0),
    )
    .addHelpText(
      'after',
      '\nStarts without the database or the broker: it waits for them and retries, and exits only\non a configuration error. Without NATS_URL it refuses to start unless --in-process.',
    )
    .action(ctx.action(async (cmd) => runWorker(optionsOf<WorkerOptions>(cmd), ctx.io)));
});
