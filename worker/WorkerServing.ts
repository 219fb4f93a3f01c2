import type { OperationKind } from '../machines/OperationKind.ts';
import type { Route } from '../machines/routing.ts';
import type { OperationHandler } from './OperationHandler.ts';

/**
 * What a worker serves and where it reads: the part of its options a caller chooses
 * (`runtime.startWorker` takes exactly this; the runtime adds the store, transport, clock, logger
 * and deadlines). Types only, so the public declarations carry no database type.
 */
export interface WorkerServeOptions<K extends OperationKind> {
  readonly kinds: readonly K[];
  /** One handler for every kind this worker serves: the table must name them all. */
  readonly handlers: Readonly<Record<K, OperationHandler>>;
  /**
   * Operations this worker holds at once across all its queues, pulled or running (default 4).
   * With fewer slots than queues, the queues take turns.
   */
  readonly concurrency?: number;
  /**
   * Routes to consume, fixed; default: discovered from the locations registered for `site` (every
   * site's when not given) and the kinds, at start and every `discoveryIntervalMs`.
   */
  readonly routes?: readonly Route[];
  /** The site whose locations' queues it reads (see `WorkerPlacement` in planDiscovery.ts). */
  readonly site?: string;
  /** Only these locations of the site, by name. */
  readonly locations?: readonly string[];
  /** How often it looks for locations registered since (default 5 s). */
  readonly discoveryIntervalMs?: number;
  /**
   * Whether it creates the consumers of the queues it discovers (default true). A worker with
   * least-privilege NATS credentials does not: it reads each queue once the control plane's
   * routes pass has created its consumer (within one discovery interval).
   */
  readonly ensuresConsumers?: boolean;
  readonly workerId?: string;
}

/** A running worker as its caller sees it. */
export interface RunningWorker {
  readonly id: string;
  /**
   * Resolves once the worker id is claimed for this process (its first heartbeat landed) and its
   * queues are consumed; nothing is pulled before. Rejects with `CONFIG` naming the id when a live
   * process of another instance already runs under it (that worker then takes no work; stop it),
   * or when it was stopped first.
   */
  readonly ready: Promise<void>;
  /** The queues it reads now (discovered ones included). */
  queues(): readonly string[];
  /** Looks for locations registered since, at once, and reads their queues. */
  discover(): Promise<void>;
  /** Stops taking work, aborts running handlers and hands their operations back. */
  stop(): Promise<void>;
}
